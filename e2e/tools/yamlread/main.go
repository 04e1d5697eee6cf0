// Command yamlread reads a YAML stream on stdin as kubectl reads a manifest file (`kubectl apply -f`):
// k8s.io/apimachinery's util/yaml YAMLOrJSONDecoder, which splits the documents and converts each with
// sigs.k8s.io/yaml (go.yaml.in/yaml/v2 underneath: YAML 1.1-style resolution) into an unstructured object.
// It prints each non-empty document as one line of JSON, numbers as they were decoded: the reference
// tests/test_yaml_readback.py's readers and e2e/test_yamlread.py hold build/<stack>/kubernetes.yaml to.
// A stream it cannot read is one line {"error": "<message>"} and exit 1.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	d := yaml.NewYAMLOrJSONDecoder(os.Stdin, 4096)
	for {
		var obj map[string]interface{}
		err := d.Decode(&obj)
		if err == io.EOF {
			return
		}
		if err != nil {
			_ = enc.Encode(map[string]string{"error": err.Error()})
			out.Flush()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if obj == nil {
			continue
		}
		if err := enc.Encode(obj); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
