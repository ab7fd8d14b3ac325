package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// shells are those `gpuq completion` writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

func newCompletionCmd(io ioStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "completion SHELL",
		Short: "Print a shell completion script (bash, zsh, fish or powershell), job ids included",
		Long: `Print the completion script for a shell: commands, flags, and the daemon's job ids.

bash: the script works with or without the bash-completion package.
  source <(gpuq completion bash)                      # this shell
  gpuq completion bash > ~/.local/share/bash-completion/completions/gpuq
zsh:
  gpuq completion zsh > "${fpath[1]}/_gpuq"           # compinit must be run in .zshrc
fish:
  gpuq completion fish > ~/.config/fish/completions/gpuq.fish`,
		ValidArgs: shells,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || !slices.Contains(shells, args[0]) {
				return badInput("name a shell: gpuq completion %s", strings.Join(shells, "|"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return bashCompletion(root, io.Out)
			case "zsh":
				return root.GenZshCompletion(io.Out)
			case "fish":
				return root.GenFishCompletion(io.Out, true)
			}
			return root.GenPowerShellCompletionWithDesc(io.Out)
		},
	}
}

// bashFallbacks stand in for the two functions of the bash-completion package that
// cobra's script calls, where that package is not installed: the words of the line up
// to the cursor, split at blanks (quotes are not parsed), and file names.
const bashFallbacks = `# Without the bash-completion package, minimal stand-ins for the two of its functions
# this script uses.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
_get_comp_words_by_ref() {
    local line=${COMP_LINE:0:COMP_POINT}
    read -ra words <<<"$line"
    if [[ -z $line || $line == *[[:blank:]] ]]; then
        words+=("")
    fi
    cword=$((${#words[@]} - 1))
    cur=${words[cword]}
    prev=${words[cword > 0 ? cword - 1 : 0]}
}
fi
if ! declare -F _filedir >/dev/null 2>&1; then
_filedir() {
    local IFS=$'\n' extglob
    extglob=$(shopt -p extglob)
    shopt -s extglob
    if [[ $1 == -d ]]; then
        COMPREPLY+=($(compgen -d -- "$cur"))
    elif [[ -n $1 ]]; then
        COMPREPLY+=($(compgen -d -- "$cur") $(compgen -f -X "!*.@($1)" -- "$cur"))
    else
        COMPREPLY+=($(compgen -f -- "$cur"))
    fi
    eval "$extglob"
}
fi

`

func bashCompletion(root *cobra.Command, w io.Writer) error {
	if _, err := fmt.Fprint(w, bashFallbacks); err != nil {
		return err
	}
	return root.GenBashCompletionV2(w, true)
}
