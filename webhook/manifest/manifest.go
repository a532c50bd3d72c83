// Package manifest runs wincompat's mutation over multi-document YAML, the way `wincompat mutate` and
// Helm post-renderers need it: every object the admission webhook would change is changed the same way,
// everything else passes through byte for byte, and comments survive.
package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/patch"
	"github.com/wincompat/wincompat/patch/yamlpatch"
	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
)

// Options are the facts a manifest stream does not carry itself.
type Options struct {
	Policy *policy.Policy
	// Namespace simulates the namespace objects land in; an object's metadata.namespace overrides the
	// name, not the labels.
	Namespace policy.Namespace
	Version   string
	// Images, when set, reads pods' images from their registries (wincompat mutate --resolve-images).
	Images webhook.ImageResolver
}

// Document is one object of the stream and what wincompat did to it.
type Document struct {
	Source string // file name, or "-" for stdin
	Index  int    // 1-based position in its source
	Kind   string
	Name   string // namespace/name, or generateName
	Patch  patch.Patch
	// Messages are what wincompat tells of the object, what needs action first; Warnings are their
	// texts, in the same order.
	Messages []policy.Message
	Warnings []string
	// Mutated is true when the object changed.
	Mutated bool
	// Decision is what the policy decided (in warn mode too, where nothing changed), for --explain.
	Decision policy.Decision
	// WarnMode is true when the namespace's mode left the object as it came.
	WarnMode bool
	// Before and After are the document as read and as written, for --output diff.
	Before, After []byte
	// plain is true when After is the patched object written as plain YAML (render's fallback) rather
	// than the document's own tree, patched and encoded.
	plain bool
}

// Label names the document in messages: "deploy.yaml#3 Deployment demo/web".
func (d Document) Label() string {
	l := fmt.Sprintf("%s#%d", d.Source, d.Index)
	if d.Kind != "" {
		l += " " + d.Kind + " " + d.Name
	}
	return l
}

// Error is a problem with one document.
type Error struct {
	Doc Document
	Err error
}

func (e *Error) Error() string { return e.Doc.Label() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Process mutates every document of src and writes the stream to out. Documents wincompat does not change
// are written exactly as read. On any error nothing is written, so a failed post-render never deploys half
// a release; the error lists every bad document.
func Process(source string, src []byte, out io.Writer, opts Options) ([]Document, error) {
	var buf bytes.Buffer
	var docs []Document
	var errs []error
	for i, chunk := range splitDocuments(src) {
		buf.WriteString(chunk.separator)
		doc := Document{Source: source, Index: i + 1}
		body, err := processOne(chunk.body, chunk.line, &doc, opts)
		if err != nil {
			errs = append(errs, &Error{Doc: doc, Err: err})
			continue
		}
		if doc.Mutated {
			doc.Before, doc.After = chunk.body, body
		}
		buf.Write(body)
		if doc.Kind != "" {
			docs = append(docs, doc)
		}
	}
	if len(errs) > 0 {
		return docs, errors.Join(errs...)
	}
	_, err := out.Write(buf.Bytes())
	return docs, err
}

type chunk struct {
	separator string // the "---" line that opened the document, "" for the first
	body      []byte
	line      int // the line of the file body starts on, 1-based
}

// splitDocuments cuts a stream at "---" lines. A line starting with "---" is always a document marker:
// content of a block scalar is indented, so it cannot start a line with "---". Splitting on text rather
// than with a YAML decoder lets untouched documents pass through byte for byte.
func splitDocuments(src []byte) []chunk {
	var chunks []chunk
	cur := chunk{line: 1}
	start, line := 0, 1
	for ; start < len(src); line++ {
		end := bytes.IndexByte(src[start:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += start + 1
		}
		text := src[start:end]
		if isSeparator(text) {
			if start > 0 || cur.separator != "" {
				chunks = append(chunks, cur)
			}
			cur = chunk{separator: string(text), line: line + 1}
		} else {
			cur.body = append(cur.body, text...)
		}
		start = end
	}
	return append(chunks, cur)
}

func isSeparator(line []byte) bool {
	t := strings.TrimRight(string(line), "\r\n")
	return t == "---" || strings.HasPrefix(t, "--- ") || strings.HasPrefix(t, "---\t")
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
		Namespace    string `json:"namespace"`
	} `json:"metadata"`
}

// processOne returns the bytes to write for one document body, which starts on line of its file.
func processOne(body []byte, line int, doc *Document, opts Options) ([]byte, error) {
	var node yaml.Node
	if err := yaml.Unmarshal(body, &node); err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", fileLines(oneLine(err), line-1))
	}
	if node.Kind == 0 || (len(node.Content) == 1 && node.Content[0].Tag == "!!null") {
		return body, nil // empty or comment-only document
	}
	root := node.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("document is a YAML %s, not a Kubernetes object", kindName(root))
	}
	raw, err := sigsyaml.YAMLToJSON(body)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", fileLines(oneLine(err), line-1))
	}
	var tm typeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("apiVersion, kind or metadata has the wrong type: %s", oneLine(err))
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, errors.New("document has no apiVersion or kind")
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if gvk == (schema.GroupVersionKind{Version: "v1", Kind: "List"}) {
		doc.Kind, doc.Name = tm.Kind, "-"
		doc.setMessages([]policy.Message{{Severity: policy.SeverityWarning, Text: "wincompat: a List passes through unchanged; give one object per document to have its items mutated"}})
		return body, nil
	}
	if !webhook.Supported(gvk) {
		return body, nil // not a pod or workload: none of wincompat's business
	}
	doc.Kind = tm.Kind
	ns := opts.Namespace
	if tm.Metadata.Namespace != "" {
		ns.Name = tm.Metadata.Namespace
	}
	doc.Name = ns.Name + "/" + tm.Metadata.Name
	if tm.Metadata.Name == "" {
		doc.Name = ns.Name + "/" + tm.Metadata.GenerateName + "*"
	}
	res, err := webhook.MutateResolving(context.Background(), opts.Policy, gvk, raw, policy.Facts{Operation: policy.Create, Namespace: ns, Version: opts.Version}, opts.Images)
	if err != nil {
		return nil, errors.New(oneLine(err))
	}
	doc.Decision = res.Decision
	mode, modeNote := opts.Policy.ModeFor(ns)
	if modeNote != "" && res.Decision.Handled() {
		// A namespace label wincompat could not read: the mode it meant may not be the one applied.
		defer func() {
			doc.setMessages(append(doc.Messages, policy.Message{Severity: policy.SeverityWarning, Text: "wincompat: " + modeNote}))
		}()
	}
	if mode == policy.ModeWarn {
		// As the webhook answers in warn mode: the object as it came, and what would have changed.
		doc.WarnMode = true
		doc.setMessages(res.Decision.WouldMessages())
		return body, nil
	}
	if res.Decision.Denied != "" {
		return nil, errors.New(res.Decision.DeniedMessage())
	}
	doc.Patch = res.Patch
	doc.setMessages(res.Decision.Messages())
	if len(res.Patch) == 0 {
		return body, nil
	}
	doc.Mutated = true
	out, plain, err := render(body, raw, root, &node, res.Patch)
	doc.plain = plain
	return out, err
}

// setMessages sets the document's messages, what needs action first, and Warnings their texts.
func (d *Document) setMessages(ms []policy.Message) {
	d.Messages = policy.ByAttention(ms)
	d.Warnings = make([]string, len(ms))
	for i, m := range ms {
		d.Warnings[i] = m.Text
	}
}

// render writes the patched document, keeping comments and layout by patching the YAML tree. The JSON
// patch applied to the raw JSON is the reference: if the tree edit does not give the same object (an
// anchor on the path, say), the reference is written instead, as plain YAML, and plain says so.
func render(body, raw []byte, root, doc *yaml.Node, p patch.Patch) (out []byte, plain bool, err error) {
	pj, err := json.Marshal(p)
	if err != nil {
		return nil, false, err
	}
	jp, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		return nil, false, err
	}
	want, err := jp.Apply(raw)
	if err != nil {
		return nil, false, fmt.Errorf("patch does not apply: %s", oneLine(err))
	}
	if err := yamlpatch.Apply(root, p); err == nil {
		if b, err := encodeTree(doc); err == nil && sameJSON(b, want) {
			return b, false, nil
		}
	}
	out, err = plainYAML(body, want)
	return out, true, err
}

// encodeTree writes a document's tree as render does. The encoder has its own layout: it drops blank
// lines, indents every sequence under its key and may quote differently, so a document comes out of
// it changed in whitespace where wincompat changed nothing.
func encodeTree(doc *yaml.Node) ([]byte, error) {
	unfold(doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plainYAML writes the object as JSON gives it, after the comments body starts with.
func plainYAML(body, object []byte) ([]byte, error) {
	out, err := sigsyaml.JSONToYAML(object)
	if err != nil {
		return nil, err
	}
	return append(leadingComments(body), out...), nil
}

// asWritten is the document as read, written the way After was (its tree encoded, or the object as
// plain YAML), so that a diff against After holds what wincompat changed and none of the encoder's
// layout. The document as read when it cannot be written so.
func (d Document) asWritten() []byte {
	if d.plain {
		raw, err := sigsyaml.YAMLToJSON(d.Before)
		if err != nil {
			return d.Before
		}
		out, err := plainYAML(d.Before, raw)
		if err != nil {
			return d.Before
		}
		return out
	}
	var node yaml.Node
	if err := yaml.Unmarshal(d.Before, &node); err != nil || node.Kind == 0 {
		return d.Before
	}
	out, err := encodeTree(&node)
	if err != nil {
		return d.Before
	}
	return out
}

// unfold renders folded scalars as literal ones: the YAML encoder does not re-emit every folded scalar
// faithfully (a more-indented line gains a blank line), while literal style keeps the value exactly.
func unfold(n *yaml.Node) {
	if n.Style&yaml.FoldedStyle != 0 {
		n.Style = n.Style&^yaml.FoldedStyle | yaml.LiteralStyle
	}
	for _, c := range n.Content {
		unfold(c)
	}
}

func sameJSON(y, want []byte) bool {
	got, err := sigsyaml.YAMLToJSON(y)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// leadingComments keeps the comment lines before a document's first content, such as Helm's
// "# Source: chart/templates/deployment.yaml".
func leadingComments(body []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(body, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			break
		}
		out = append(out, line...)
	}
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar (" + n.Tag + ")"
	default:
		return "alias or other non-mapping"
	}
}

// yamlLine is how the YAML parsers (yaml.v3, and yaml.v2 under sigs.k8s.io/yaml) name a line.
var yamlLine = regexp.MustCompile(`\byaml: line (\d+)\b`)

// fileLines turns the line numbers of a parser's message, counted from a document's first line, into
// lines of its file: the document's lines come after offset others.
func fileLines(msg string, offset int) string {
	if offset == 0 {
		return msg
	}
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(m, "yaml: line "))
		if err != nil {
			return m
		}
		return "yaml: line " + strconv.Itoa(n+offset)
	})
}

// oneLine keeps errors to one line: YAML and JSON errors sometimes span several.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
