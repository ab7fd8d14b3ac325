package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
)

// Exit statuses, the same for every verb.
const (
	exitOK        = 0
	exitFailed    = 1   // the work ran and something failed
	exitBadInput  = 2   // a bad sweep, flag, plan or size: nothing was started
	exitInterrupt = 130 // stopped by Ctrl-C
	// exitOutputGone ends gpuq logs or attach whose reader went first (… | head): the
	// status a shell gives tail -f and kubectl logs -f there (128+SIGPIPE, of which
	// they die), given once the terminal is back as it was.
	exitOutputGone = 141
)

// quiet marks an error that its exit status says all of: the person ended the verb
// (Ctrl-C, a | head that has read enough), and, as of tail -f, nothing is said of it.
type quiet struct{ err error }

func (q quiet) Error() string { return q.err.Error() }
func (q quiet) Unwrap() error { return q.err }

var (
	// errOutputGone ends gpuq logs or attach once what reads their output has gone.
	errOutputGone = quiet{errors.New("what reads gpuq's output has gone")}
	// errStoppedWatching ends gpuq logs or attach that Ctrl-C (or SIGTERM) stopped:
	// they only watched, and stopped nothing else.
	errStoppedWatching = quiet{errInterrupted}
)

// inputError marks an error as the user's input to fix.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// exactArgs is cobra.ExactArgs with the error marked as bad input.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return inputError{fmt.Errorf("%w%s; see gpuq %s --help", err, flagMeant(cmd, args[min(n, len(args)):]), cmd.Name())}
		}
		return nil
	}
}

// flagMeant points a word given as an argument that is the name of one of cmd's
// flags to the flag (gpuq daemon stop: "did you mean --stop?").
func flagMeant(cmd *cobra.Command, extra []string) string {
	for _, a := range extra {
		if f := cmd.Flags().Lookup(a); f != nil {
			return fmt.Sprintf(" (did you mean --%s?)", f.Name)
		}
	}
	return ""
}

// maxArgs is cobra.MaximumNArgs with the error marked as bad input.
func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MaximumNArgs(n)(cmd, args); err != nil {
			return inputError{fmt.Errorf("%w; see gpuq %s --help", err, cmd.Name())}
		}
		return nil
	}
}

// noArgs is cobra.NoArgs with the error marked as bad input.
var noArgs = exactArgs(0)

// unknownCommand is the error for a word that names no command of cmd.
func unknownCommand(cmd *cobra.Command, word string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return badInput("unknown command %q%s; gpuq --help lists the commands", word, plans.Suggest(word, names))
}

// newHelpCmd is `gpuq help [command]`, whose unknown topic is bad input like any
// unknown command.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return unknownCommand(root, args[len(args)-1])
			}
			return cmd.Help()
		},
	}
}

func badInput(format string, args ...any) error {
	return inputError{fmt.Errorf(format, args...)}
}

// exitCode decides the exit status of every verb from the error it returned.
func exitCode(err error) int {
	var probs plans.Problems
	var in inputError
	var refused scheduler.Refused
	var unsafe launcher.UnsafeDir
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &probs), errors.As(err, &in), errors.As(err, &refused), errors.As(err, &unsafe),
		errors.Is(err, nvidia.ErrUnknownCard):
		return exitBadInput
	case errors.Is(err, errInterrupted):
		return exitInterrupt
	case errors.Is(err, errOutputGone):
		return exitOutputGone
	}
	return exitFailed
}
