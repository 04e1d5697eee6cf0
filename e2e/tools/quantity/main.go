// Command quantity answers, for each line of stdin, what k8s.io/apimachinery's resource package makes of
// it: the reference e2e/test_quantity.py holds policy/quantity.py to.
//
// Each input line is one JSON value. For a JSON string s it prints ParseQuantity(s) ("parse") and what the
// API server's decoder makes of the field when a client sends s (encoding/json.Marshal(s), then
// Quantity.UnmarshalJSON: "json"). For any other JSON value (a number, null, true) it prints only "json",
// the server's decoding of that literal. A value is {"unscaled": "<big int>", "scale": n}, meaning
// unscaled * 10^-n exactly (the inf.Dec of Quantity.AsDec), with "value" and "milli" (Quantity.Value and
// MilliValue) below 10^15 in magnitude; a refusal is {"error": "<message>"}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

type answer struct {
	Unscaled string `json:"unscaled,omitempty"`
	Scale    *int32 `json:"scale,omitempty"`
	Value    *int64 `json:"value,omitempty"`
	Milli    *int64 `json:"milli,omitempty"`
	Error    string `json:"error,omitempty"`
}

type line struct {
	Parse *answer `json:"parse,omitempty"`
	JSON  answer  `json:"json"`
}

func of(q resource.Quantity, err error) *answer {
	if err != nil {
		return &answer{Error: err.Error()}
	}
	// AsDec converts q in place; Value and MilliValue are read from q's own form (int64 or inf.Dec).
	c := q.DeepCopy()
	d := c.AsDec()
	scale := int32(d.Scale())
	a := &answer{Unscaled: d.UnscaledBig().String(), Scale: &scale}
	// Value and MilliValue overflow int64 silently: only below 10^15 in magnitude.
	if digits := len(strings.TrimPrefix(a.Unscaled, "-")); int64(digits)-int64(scale) <= 15 {
		value, milli := q.Value(), q.MilliValue()
		a.Value, a.Milli = &value, &milli
	}
	return a
}

func decode(raw []byte) *answer {
	var q resource.Quantity
	err := json.Unmarshal(raw, &q)
	return of(q, err)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		raw := append([]byte(nil), in.Bytes()...)
		var s string
		var l line
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil { // null unmarshals into a string too
			l.Parse = of(resource.ParseQuantity(s))
			sent, err := json.Marshal(s)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			l.JSON = *decode(sent)
		} else if json.Valid(raw) {
			l.JSON = *decode(raw)
		} else {
			fmt.Fprintf(os.Stderr, "not a JSON value: %q\n", raw)
			os.Exit(2)
		}
		if err := enc.Encode(l); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
