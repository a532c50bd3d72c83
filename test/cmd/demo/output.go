package main

import "fmt"

// The demo speaks at two levels. By default each section is a heading and a few lines: what was
// applied and what came of it, so that the whole story fits in two screens. With -v it also prints the
// detail (every command line, warning, pod and rule), which the default lines do not repeat.

// section starts one of the demo's sections: always printed.
func (d *demo) section(format string, args ...any) {
	fmt.Fprintf(d.out, "\n==> "+format+"\n", args...)
}

// step starts a part of a section: printed with -v only, where the detail under it needs a heading.
func (d *demo) step(format string, args ...any) {
	if d.verbose {
		fmt.Fprintf(d.out, "\n==> "+format+"\n", args...)
	}
}

// say prints a line of the story: always printed.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "    "+format+"\n", args...)
}

// detail prints a line of the detail: with -v only.
func (d *demo) detail(format string, args ...any) {
	if d.verbose {
		fmt.Fprintf(d.out, "    "+format+"\n", args...)
	}
}

// brief prints a line that -v replaces by the detail it sums up: printed without -v only.
func (d *demo) brief(format string, args ...any) {
	if !d.verbose {
		fmt.Fprintf(d.out, "    "+format+"\n", args...)
	}
}
