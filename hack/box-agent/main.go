// Command box-agent is the test cluster's own workload: the pod sandbox's pause process, an
// HTTP answerer, and a KEDA external-push scaler whose metric a test sets over HTTP.
//
//	box-agent pause                    block until SIGTERM or SIGINT (the sandbox image's entrypoint)
//	box-agent serve [-http :8080] [-grpc :9090]
//
// serve answers GET / with "hello from <hostname>", GET /metric with the metric and
// PUT /metric?value=N with the new metric; its gRPC scaler reports active while the metric is
// above zero and reports the metric itself as the value KEDA's HPA averages.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
)

const metricName = "value"

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: box-agent pause | serve [-http ADDR] [-grpc ADDR]")
	}
	switch os.Args[1] {
	case "pause":
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
	case "serve":
		flags := flag.NewFlagSet("serve", flag.ExitOnError)
		httpAddr := flags.String("http", ":8080", "HTTP listen address")
		grpcAddr := flags.String("grpc", ":9090", "gRPC listen address")
		_ = flags.Parse(os.Args[2:])
		serve(*httpAddr, *grpcAddr)
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
}

// metric is the value the scaler reports; changed notifies streams at once.
type metric struct {
	mu      sync.Mutex
	value   int64
	changed chan struct{}
}

func (m *metric) get() (int64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value, m.changed
}

func (m *metric) set(value int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value = value
	close(m.changed)
	m.changed = make(chan struct{})
}

func serve(httpAddr, grpcAddr string) {
	m := &metric{changed: make(chan struct{})}
	listener, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	pb.RegisterExternalScalerServer(server, &scaler{metric: m})
	go func() { log.Fatal(server.Serve(listener)) }()

	hostname, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", hostname)
	})
	mux.HandleFunc("GET /metric", func(w http.ResponseWriter, r *http.Request) {
		value, _ := m.get()
		fmt.Fprintf(w, "%d\n", value)
	})
	mux.HandleFunc("PUT /metric", func(w http.ResponseWriter, r *http.Request) {
		value, err := strconv.ParseInt(r.URL.Query().Get("value"), 10, 64)
		if err != nil || value < 0 {
			http.Error(w, "value: a whole number >= 0 is required", http.StatusBadRequest)
			return
		}
		m.set(value)
		log.Printf("metric set to %d", value)
		fmt.Fprintf(w, "%d\n", value)
	})
	log.Printf("serving HTTP on %s, gRPC on %s", httpAddr, grpcAddr)
	log.Fatal(http.ListenAndServe(httpAddr, mux))
}

type scaler struct {
	pb.UnimplementedExternalScalerServer
	metric *metric
}

func (s *scaler) IsActive(context.Context, *pb.ScaledObjectRef) (*pb.IsActiveResponse, error) {
	value, _ := s.metric.get()
	return &pb.IsActiveResponse{Result: value > 0}, nil
}

// StreamIsActive pushes on every change, and every few seconds so that a reconnecting KEDA
// learns the current state without waiting for the next change.
func (s *scaler) StreamIsActive(_ *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.IsActiveResponse]) error {
	for {
		value, changed := s.metric.get()
		if err := stream.Send(&pb.IsActiveResponse{Result: value > 0}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		case <-time.After(5 * time.Second):
		}
	}
}

func (s *scaler) GetMetricSpec(context.Context, *pb.ScaledObjectRef) (*pb.GetMetricSpecResponse, error) {
	return &pb.GetMetricSpecResponse{MetricSpecs: []*pb.MetricSpec{{MetricName: metricName, TargetSize: 1}}}, nil
}

func (s *scaler) GetMetrics(context.Context, *pb.GetMetricsRequest) (*pb.GetMetricsResponse, error) {
	value, _ := s.metric.get()
	return &pb.GetMetricsResponse{MetricValues: []*pb.MetricValue{{MetricName: metricName, MetricValue: value}}}, nil
}
