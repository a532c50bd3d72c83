package strictyaml

import (
	"reflect"
	"strings"
	"sync"
)

// Keys are the keys of a mapping decoded into a struct, in the struct's order.
type Keys struct {
	Names  []string
	byName map[string]Key
}

// Key is one key of a mapping: where its value goes in the struct and the value's type.
type Key struct {
	index []int
	Type  reflect.Type
}

// Lookup finds the key called name.
func (k Keys) Lookup(name string) (Key, bool) {
	key, ok := k.byName[name]
	return key, ok
}

var keysCache sync.Map // reflect.Type → Keys

// KeysOf lists the keys of struct type t: the json names of its fields whose values a file can hold
// (strings, booleans, and lists and mappings of those), with embedded structs inlined as encoding/json
// inlines them. Other fields are no keys: corev1.Taint's timeAdded is not. Decode reads these keys,
// Node writes them, and a JSON Schema of the file can be drawn from them.
func KeysOf(t reflect.Type) Keys {
	if k, ok := keysCache.Load(t); ok {
		return k.(Keys)
	}
	keys := Keys{byName: map[string]Key{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			inner := KeysOf(f.Type)
			for _, n := range inner.Names {
				k := inner.byName[n]
				keys.Names = append(keys.Names, n)
				keys.byName[n] = Key{index: append([]int{i}, k.index...), Type: k.Type}
			}
			continue
		}
		if name == "" || name == "-" || !f.IsExported() || !fileHoldable(f.Type) {
			continue
		}
		keys.Names = append(keys.Names, name)
		keys.byName[name] = Key{index: []int{i}, Type: f.Type}
	}
	keysCache.Store(t, keys)
	return keys
}

func fileHoldable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Struct:
		return true
	case reflect.Slice:
		return fileHoldable(t.Elem())
	}
	return false
}
