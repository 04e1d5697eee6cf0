// extproc-pick: asks an endpoint picker (EPP) for an endpoint over Envoy's ext_proc protocol, the way a gateway
// does for a request routed to an InferencePool, and prints what the EPP answered as JSON.
//
// One ext_proc stream per request, as Envoy opens one per HTTP request in the EPP's processing mode (request
// headers, then the body streamed, FULL_DUPLEX_STREAMED; GIE v1.5.0 pkg/epp/handlers/server.go answers the
// headers only once the body's end_of_stream arrived, then the body in chunks): the request headers (:method POST, :path,
// content-type application/json, plus every -H), then the JSON body with end_of_stream. Printed: the header
// mutations of the headers response (x-gateway-destination-endpoint among them), its dynamic metadata
// (namespace envoy.lb), the body responses' count, or an immediate response with its HTTP status and body, or
// the gRPC status the stream ended with. Exit 0 whenever the EPP answered, 1 when it could not be reached.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ",") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

type answer struct {
	Headers         map[string]string `json:"headers,omitempty"`
	DynamicMetadata json.RawMessage   `json:"dynamicMetadata,omitempty"`
	BodyResponses   int               `json:"bodyResponses"`
	Immediate       *immediate        `json:"immediateResponse,omitempty"`
	GRPCStatus      *grpcStatus       `json:"grpcStatus,omitempty"`
}

type immediate struct {
	Status  int32             `json:"status"`
	Body    string            `json:"body"`
	Details string            `json:"details,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

type grpcStatus struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func header(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }

func main() {
	addr := flag.String("addr", "", "the EPP's ext_proc address, host:port")
	path := flag.String("path", "/v1/chat/completions", "the request's :path")
	model := flag.String("model", "", "the model field of the JSON body (unless -body)")
	prompt := flag.String("prompt", "hello", "the user message of the JSON body (unless -body)")
	body := flag.String("body", "", "the whole JSON body, instead of -model/-prompt")
	timeout := flag.Duration("timeout", 10*time.Second, "the whole exchange's deadline")
	plaintext := flag.Bool("plaintext", false, "plaintext gRPC (the EPP's --secure-serving=false); "+
		"default TLS without verifying the EPP's self-signed certificate, as the chart's gateway configs do")
	var extra headerFlags
	flag.Var(&extra, "H", "an extra request header 'name: value' (repeatable)")
	flag.Parse()
	if *addr == "" || (*body == "" && *model == "") {
		fmt.Fprintln(os.Stderr, "usage: extproc-pick -addr HOST:PORT (-model M [-prompt P] | -body JSON) [-path P] [-H 'k: v']...")
		os.Exit(2)
	}
	payload := []byte(*body)
	if *body == "" {
		payload, _ = json.Marshal(map[string]any{
			"model":    *model,
			"messages": []map[string]string{{"role": "user", "content": *prompt}},
		})
	}
	headers := []*corev3.HeaderValue{
		header(":method", "POST"), header(":path", *path), header(":authority", "gateway.local"),
		header("content-type", "application/json"),
	}
	for _, h := range extra {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			fmt.Fprintf(os.Stderr, "-H %q: want 'name: value'\n", h)
			os.Exit(2)
		}
		headers = append(headers, header(strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// GIE v1.5.0's EPP serves TLS by default (--secure-serving, a self-signed certificate unless --cert-path:
	// pkg/epp/server/runserver.go); config/charts/inferencepool/templates/istio.yaml has its gateway dial it
	// with TLS mode SIMPLE and insecureSkipVerify.
	creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // see above
	if *plaintext {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err == nil {
		err = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: headers}},
		}})
	}
	if err == nil {
		err = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: payload, EndOfStream: true},
		}})
	}
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "ext_proc stream:", err)
		os.Exit(1)
	}

	var out answer
	for {
		resp, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				st := status.Convert(err)
				if st.Code().String() == "Unavailable" && out.Headers == nil && out.Immediate == nil {
					fmt.Fprintln(os.Stderr, "ext_proc stream:", err)
					os.Exit(1)
				}
				out.GRPCStatus = &grpcStatus{Code: st.Code().String(), Message: st.Message()}
			}
			break
		}
		if md := resp.GetDynamicMetadata(); md != nil {
			out.DynamicMetadata, _ = protojson.Marshal(md)
		}
		switch r := resp.Response.(type) {
		case *extprocv3.ProcessingResponse_RequestHeaders:
			out.Headers = map[string]string{}
			for _, h := range r.RequestHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
				v := string(h.GetHeader().GetRawValue())
				if v == "" {
					v = h.GetHeader().GetValue()
				}
				out.Headers[h.GetHeader().GetKey()] = v
			}
		case *extprocv3.ProcessingResponse_RequestBody:
			out.BodyResponses++
			sr := r.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr == nil || sr.GetEndOfStream() {
				// The whole body is back: the gateway would now send the request upstream.
				_ = stream.CloseSend()
				cancel()
				emit(out)
				return
			}
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			ir := r.ImmediateResponse
			out.Immediate = &immediate{Status: int32(ir.GetStatus().GetCode()), Body: string(ir.GetBody()), Details: ir.GetDetails()}
			for _, h := range ir.GetHeaders().GetSetHeaders() {
				if out.Immediate.Headers == nil {
					out.Immediate.Headers = map[string]string{}
				}
				out.Immediate.Headers[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
			}
			_ = stream.CloseSend()
			emit(out)
			return
		}
	}
	emit(out)
}

func emit(out answer) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}
