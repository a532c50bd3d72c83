package policy

import "testing"

// TestLinuxCommands holds the command table to real commands: the corpus charts' (named by chart) and
// the Windows forms that must never be reported.
func TestLinuxCommands(t *testing.T) {
	runHeuristicCases(t, []heuristicCase{
		{"bitnami-postgresql exec probes", `
containers:
- name: postgresql
  livenessProbe: {exec: {command: ["/bin/sh", "-c", "exec pg_isready -U \"postgres\" -h 127.0.0.1 -p 5432"]}}
  readinessProbe: {exec: {command: ["/bin/sh", "-c", "-e", "exec pg_isready -U \"postgres\" -h 127.0.0.1 -p 5432\n[ -f /opt/bitnami/postgresql/tmp/.initialized ] || [ -f /bitnami/postgresql/.initialized ]\n"]}}
`, []string{
			`linuxCommands spec.containers[postgresql].livenessProbe.exec.command = ["/bin/sh","…"]`,
			// Clipped to maxRecordedBytes.
			`linuxCommands spec.containers[postgresql].readinessProbe.exec.command = ["/bin/sh","…"]`,
		}},
		{"bitnami-nginx init container /bin/bash", `
initContainers:
- name: preserve-logs-symlinks
  command: ["/bin/bash"]
  args: ["-ec", "mkdir -p /emptydir/app-logs-dir"]
containers: [{name: nginx}]
`, []string{`linuxCommands spec.initContainers[preserve-logs-symlinks].command = ["/bin/bash"]`}},
		{"argo-cd: /bin/cp, sh -c, and a program in /usr/local/bin given as args", `
initContainers:
- name: copyutil
  command: ["/bin/cp", "-n", "/usr/local/bin/argocd", "/shared/argocd-dex"]
- name: copyutil2
  command: ["sh", "-c"]
  args: ["ln -s /usr/local/bin/argocd /var/run/argocd/argocd-cmp-server"]
containers:
- name: server
  args: ["/usr/local/bin/argocd-server", "--port=8080", "--metrics-port=8083"]
`, []string{
			`linuxCommands spec.initContainers[copyutil].command = ["/bin/cp","…"]`,
			`linuxCommands spec.initContainers[copyutil2].command = ["sh","…"]`,
			`linuxCommands spec.containers[server].args = ["/usr/local/bin/argocd-server","…"]`,
		}},
		{"datadog bash -c and fluent-bit's test sh", `
initContainers: [{name: init-volume, command: ["bash", "-c"], args: ["cp -r /etc/datadog-agent /opt"]}]
containers: [{name: wget, command: ["sh"], args: ["-c", "wget -O- fluent-bit:2020"]}]
`, []string{
			`linuxCommands spec.initContainers[init-volume].command = ["bash","…"]`,
			`linuxCommands spec.containers[wget].command = ["sh"]`,
		}},
		{"preStop sleep and postStart env", `
containers:
- name: app
  lifecycle:
    postStart: {exec: {command: ["/usr/bin/env", "touch", "/tmp/started"]}}
    preStop: {exec: {command: ["sleep", "5"]}}
`, []string{
			`linuxCommands spec.containers[app].lifecycle.postStart.exec.command = ["/usr/bin/env","…"]`,
			`linuxCommands spec.containers[app].lifecycle.preStop.exec.command = ["sleep","…"]`,
		}},
		{"shell scripts are certain where argv[0] is the program, likely in args", `
containers:
- name: web
  command: ["/docker-entrypoint.sh", "nginx", "-g", "daemon off;"]
  startupProbe: {exec: {command: ["/opt/bitnami/scripts/ping.SH"]}}
- name: worker
  args: ["/entrypoint.sh", "--queue=default"]
- name: installed
  command: ["/usr/local/bin/run.sh"]
`, []string{
			`linuxCommands spec.containers[worker].args = ["/entrypoint.sh","…"]`,
			`linuxScriptCommands spec.containers[web].startupProbe.exec.command = ["/opt/bitnami/scripts/ping.SH"]`,
			`linuxScriptCommands spec.containers[web].command = ["/docker-entrypoint.sh","…"]`,
			`linuxScriptCommands spec.containers[installed].command = ["/usr/local/bin/run.sh"]`,
		}},
		{"an ephemeral debug shell, and a path cleaned before it is matched", `
containers: [{name: app, command: ["/usr/bin/../bin/sh"]}]
ephemeralContainers: [{name: debug, command: ["busybox", "sh"]}]
`, []string{
			`linuxCommands spec.containers[app].command = ["/usr/bin/../bin/sh"]`,
			`linuxCommands spec.ephemeralContainers[debug].command = ["busybox","…"]`,
		}},
		{"Windows forms from the corpus are never reported", `
initContainers:
- name: init
  command: ["powershell.exe", "-c", "New-Item -ItemType Directory -Path C:\\var\\lib\\kubelet\\plugins\\smb.csi.k8s.io\\ -Force"]
- name: init-config
  command: ["pwsh", "-Command"]
- name: configure-firewall
  command: ["powershell"]
containers:
- name: smb
  command: ["smbplugin.exe"]
- name: agent
  command: ["agent", "run"]
- name: process-agent
  command: ["process-agent", "-foreground", "--cfgpath=C:/ProgramData/Datadog/datadog.yaml"]
- name: cmd
  command: ["cmd", "/c", "ping -n 1 localhost"]
  livenessProbe: {exec: {command: ["cmd.exe", "/c", "exit 0"]}}
  lifecycle: {preStop: {exec: {command: ["C:\\bin\\sh", "-c", "exit"]}}}
- name: drive
  command: ["c:/bin/sh"]
  readinessProbe: {exec: {command: ["/bin/sh.exe", "-c", "true"]}}
  startupProbe: {exec: {command: ["/scripts/check.ps1"]}}
`, nil},
		{"forms the table leaves out: a Windows image may have them", `
containers:
- name: controller
  args: ["/nginx-ingress-controller", "--election-id=ingress-nginx-leader"]
  lifecycle: {preStop: {exec: {command: ["/wait-shutdown"]}}}
- name: fluent-bit
  command: ["/fluent-bit/bin/fluent-bit"]
  livenessProbe: {exec: {command: ["curl", "-f", "http://localhost:2020"]}}
- name: upper
  command: ["/BIN/SH"]
- name: relative
  command: ["bin/sh"]
- name: arguments
  command: ["/app/server"]
  args: ["/bin/sh", "-c", "x.sh"]
- name: empty
  command: [""]
  livenessProbe: {exec: {command: []}}
`, nil},
	})
}

// TestCommandFormsTable checks the table's own rules: Windows rows come before the rows that would claim
// their forms, and every listed value is recognised with its row's certainty.
func TestCommandFormsTable(t *testing.T) {
	seenLinux := false
	for _, f := range commandForms {
		if f.certainty == windowsForm && seenLinux {
			t.Errorf("command form %q is a Windows form after a Linux one: a Linux row would claim it", f.form)
		}
		seenLinux = seenLinux || f.certainty != windowsForm
		if f.kind != argv0WindowsPath && len(f.values) == 0 {
			t.Errorf("command form %q matches nothing", f.form)
		}
		for _, v := range f.values {
			program := v
			switch f.kind {
			case argv0Suffix:
				program = "/x/run" + v
			case argv0InDir:
				program = v + "/tool"
			}
			if got, ok := classifyArgv0(program); !ok || got != f.certainty {
				t.Errorf("%q (row %q): got %v, %v; want %v", program, f.form, got, ok, f.certainty)
			}
		}
	}
}
