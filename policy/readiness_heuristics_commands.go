package policy

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// How a Windows container runs a command (hcsshim internal/cmd, internal/jobcontainers/path.go):
// containerd hands the argv to hcsshim, which joins it into one command line with Windows quoting, and
// the program is found as CreateProcess finds it: a path without a drive is on the working directory's
// drive, C: in a container (/bin/sh is C:\bin\sh), a name without an extension gets ".exe", and a
// bare name is searched in C:\Windows, C:\Windows\System32, the working directory and the PATH. Only
// the program (argv[0]) decides whether the command can start, so only argv[0] is matched; the
// arguments are never read.

// argv0Kind is how a commandForm matches argv[0].
type argv0Kind uint8

const (
	argv0WindowsPath argv0Kind = iota // holds a backslash or starts with a drive letter
	argv0Suffix                       // its base name ends with one of values, in any case
	argv0InDir                        // an absolute POSIX path directly in one of values
	argv0Name                         // a bare name (no slash) equal to one of values
)

// commandForm is one row of the table of programs recognised in a command's argv[0].
type commandForm struct {
	form      string // what the row recognises, for the README and tests
	kind      argv0Kind
	values    []string
	certainty certainty
	why       string
}

// commandForms is the one table of program forms; the first row that matches decides. Windows forms come
// first so that /bin/sh.exe or C:/bin/sh is never reported; a shell script beats the directory it is in.
// What is not listed is not reported: /wait-shutdown or /fluent-bit/bin/fluent-bit may be a Windows
// program at C:\wait-shutdown.exe (fluent-bit's Windows image has C:\fluent-bit\bin\fluent-bit.exe).
var commandForms = []commandForm{
	{"a Windows path", argv0WindowsPath, nil, windowsForm,
		"a backslash or a drive letter is written for Windows"},
	{"a Windows program or script", argv0Suffix, []string{".exe", ".com", ".bat", ".cmd", ".ps1"}, windowsForm,
		"the extensions CreateProcess, cmd and PowerShell run"},
	{"a shell script", argv0Suffix, []string{".sh", ".bash"}, certain,
		"CreateProcess starts Windows executables and batch files and reads no #! line: a shell script cannot be the program, whatever the image holds"},
	{"a program in a POSIX binary directory", argv0InDir, []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}, likely,
		"/bin/sh is looked up as C:\\bin\\sh.exe, which a Windows image has only if someone put a Windows build there"},
	{"a POSIX shell by name", argv0Name, []string{"sh", "bash", "ash", "dash", "ksh", "zsh", "busybox"}, likely,
		"Windows base images ship no sh.exe or bash.exe; one comes only with Git for Windows, MSYS2 or busybox-w32 on the PATH"},
	{"a POSIX utility by name", argv0Name, []string{"env", "sleep", "cat", "test", "true", "false", "touch", "kill", "pkill", "pgrep", "grep", "wget", "cp", "mv", "rm", "ln", "ls", "chmod", "chown", "mkdir", "echo"}, likely,
		"Windows base images have no such executables (echo and mkdir are built into cmd, which a command line does not start); curl, tar, find, sort and hostname are left out: System32 has them"},
}

// classifyArgv0 says how sure the table is that program fails on Windows, and false when no row names it.
func classifyArgv0(program string) (certainty, bool) {
	if program == "" {
		return 0, false
	}
	for i := range commandForms {
		if commandForms[i].matches(program) {
			return commandForms[i].certainty, true
		}
	}
	return 0, false
}

func (f *commandForm) matches(program string) bool {
	switch f.kind {
	case argv0WindowsPath:
		return strings.ContainsRune(program, '\\') || len(program) >= 2 && program[1] == ':' && isASCIILetter(program[0])
	case argv0Suffix:
		base := program[strings.LastIndexByte(program, '/')+1:]
		return slices.ContainsFunc(f.values, func(ext string) bool { return hasSuffixFold(base, ext) })
	case argv0InDir:
		// Linux paths are case-sensitive: /BIN/SH is not the Linux form.
		return strings.HasPrefix(program, "/") && slices.Contains(f.values, path.Dir(path.Clean(program)))
	case argv0Name:
		return slices.Contains(f.values, program)
	}
	return false
}

func isASCIILetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

// commandField is one command of a container and the path of its field.
type commandField struct {
	field string // relative to the container
	argv  []string
}

// containerCommands lists the commands of c that run inside the container: its exec probes, its exec
// lifecycle hooks, and its command. When command is empty, args are what runs only if the image has no
// ENTRYPOINT, so a form found there is at most likely (entrypointUnknown).
func containerCommands(c *corev1.Container) (cmds []commandField, entrypointUnknown bool) {
	probes := [...]struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
	for _, p := range probes {
		if p.probe != nil && p.probe.Exec != nil {
			cmds = append(cmds, commandField{p.name + ".exec.command", p.probe.Exec.Command})
		}
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil && l.PostStart.Exec != nil {
			cmds = append(cmds, commandField{"lifecycle.postStart.exec.command", l.PostStart.Exec.Command})
		}
		if l.PreStop != nil && l.PreStop.Exec != nil {
			cmds = append(cmds, commandField{"lifecycle.preStop.exec.command", l.PreStop.Exec.Command})
		}
	}
	if len(c.Command) > 0 {
		return append(cmds, commandField{"command", c.Command}), false
	}
	if len(c.Args) > 0 {
		return append(cmds, commandField{"args", c.Args}), true
	}
	return cmds, false
}

// commandFindings reports the commands whose program the table recognises with exactly want.
func commandFindings(spec *corev1.PodSpec, want certainty) []readinessFinding {
	var found findingList
	eachContainer(spec, func(at containerAt, c *corev1.Container) bool {
		cmds, entrypointUnknown := containerCommands(c)
		for _, cmd := range cmds {
			if len(cmd.argv) == 0 {
				continue
			}
			got, ok := classifyArgv0(cmd.argv[0])
			if !ok || got == windowsForm {
				continue
			}
			if entrypointUnknown && cmd.field == "args" {
				got = min(got, likely)
			}
			if got == want && !found.add(at.path("."+cmd.field), recordArgv(cmd.argv)) {
				return false
			}
		}
		return true
	})
	return found
}

// linuxCommands finds exec probes, exec lifecycle hooks and entrypoints whose program is a POSIX shell
// or tool (/bin/sh -c ..., bash, sleep, anything in /usr/bin): likely to fail in a Windows container,
// not certain, since an image can carry a Windows build of it.
func linuxCommands(spec *corev1.PodSpec) []readinessFinding { return commandFindings(spec, likely) }

// linuxScriptCommands finds exec probes, exec lifecycle hooks and commands whose program is a shell
// script (/docker-entrypoint.sh): Windows cannot start a script as a program, so they fail certainly.
func linuxScriptCommands(spec *corev1.PodSpec) []readinessFinding {
	return commandFindings(spec, certain)
}
