package main

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Help fits the width of the terminal it is printed on, or 80 columns piped (the
// texts are written wider than that): prose is filled again, flags' descriptions wrap
// under themselves, and an example's command goes on after a backslash.
func init() {
	cobra.AddTemplateFunc("fill", fill)
	cobra.AddTemplateFunc("hang", hang)
	cobra.AddTemplateFunc("commandLine", commandLine)
	cobra.AddTemplateFunc("examples", examples)
	cobra.AddTemplateFunc("flags", flags)
}

// helpWidth is the width help is written to: the terminal's, no wider than prose
// reads well, or 80 columns.
func helpWidth(c *cobra.Command) int {
	if w := termWidth(c.OutOrStdout()); w > 0 {
		return min(w, 100)
	}
	return 80
}

const helpTemplate = `{{with (or .Long .Short)}}{{fill . $ | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}`

// usageTemplate is cobra's, its texts fitted; gpuq's commands have no groups.
const usageTemplate = `Usage:{{if .Runnable}}
{{hang (print "  " .UseLine) $}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{examples .Example $}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
{{commandLine . $}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{flags .LocalFlags $ | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{flags .InheritedFlags $ | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// fill fits a command's long text to the help's width: a paragraph of plain lines is
// filled again; any other line (a list item, indented text) that is too long breaks
// under its own indent.
func fill(text string, c *cobra.Command) string {
	width := helpWidth(c)
	paras := strings.Split(text, "\n\n")
	for i, p := range paras {
		lines := strings.Split(p, "\n")
		if plain(lines) {
			paras[i] = strings.Join(words(strings.Join(lines, " "), width), "\n")
			continue
		}
		for j, l := range lines {
			lines[j] = hangLine(l, width, "")
		}
		paras[i] = strings.Join(lines, "\n")
	}
	return strings.Join(paras, "\n\n")
}

// plain reports whether lines are prose: none indented, none a list item.
func plain(lines []string) bool {
	for _, l := range lines {
		if l == "" || l[0] == ' ' || strings.HasPrefix(l, "- ") {
			return false
		}
	}
	return true
}

// hang fits a line to the help's width, its continuation under its start.
func hang(line string, c *cobra.Command) string { return hangLine(line, helpWidth(c), "") }

// hangLine breaks a line too long for width at spaces, its continuation indented two
// more than the line itself, each break ending with tail.
func hangLine(line string, width int, tail string) string {
	if ansi.StringWidth(line) <= width {
		return line
	}
	body := strings.TrimLeft(line, " ")
	lead := line[:len(line)-len(body)]
	first := words(body, width-len(lead)-len(tail))
	if len(first) == 1 { // too long only for the blanks at its end
		return lead + first[0]
	}
	rest := words(strings.Join(first[1:], " "), width-len(lead)-2-len(tail))
	var b strings.Builder
	b.WriteString(lead + first[0])
	for _, l := range rest {
		b.WriteString(tail + "\n" + lead + "  " + l)
	}
	return b.String()
}

// commandLine is a line of a command's list of subcommands.
func commandLine(sub, c *cobra.Command) string {
	width := helpWidth(c)
	pad := strings.Repeat(" ", sub.NamePadding()+3)
	line := "  " + sub.Name() + strings.Repeat(" ", sub.NamePadding()-len(sub.Name())+1)
	return line + strings.Join(words(sub.Short, width-len(pad)), "\n"+pad)
}

// flags lists flags with their descriptions wrapped under themselves, as pflag does,
// and cuts a word too long for the width that pflag leaves whole.
func flags(fs *pflag.FlagSet, c *cobra.Command) string {
	width := helpWidth(c)
	lines := strings.Split(fs.FlagUsagesWrapped(width), "\n")
	for i, l := range lines {
		if ansi.StringWidth(l) > width {
			body := strings.TrimLeft(l, " ")
			lead := l[:len(l)-len(body)]
			lines[i] = lead + strings.Join(words(body, width-len(lead)), "\n"+lead)
		}
	}
	return strings.Join(lines, "\n")
}

// examples fits a command's examples to the help's width: a command too long goes on,
// after a backslash, on a line of its own.
func examples(text string, c *cobra.Command) string {
	width := helpWidth(c)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = hangLine(l, width, " \\")
	}
	return strings.Join(lines, "\n")
}
