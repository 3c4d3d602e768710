package config

import (
	"strings"
	"testing"
)

const telemetryServers = `servers:
  - name: robot
    command: sim-robot
`

func TestTelemetrySection(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(telemetryServers+`telemetry:
  endpoint: https://otlp.example.com:4318/base
  protocol: grpc
  headers_env: {x-api-key: OTLP_KEY}
  sample_ratio: 0.25
  resource: {deployment.environment: lab}
  forward_baggage: true
  audit_logs: true
`))
	if err != nil {
		t.Fatal(err)
	}
	tel := cfg.Telemetry
	if tel.Endpoint != "https://otlp.example.com:4318/base" || tel.Protocol != TelemetryGRPC || tel.HeadersEnv["x-api-key"] != "OTLP_KEY" ||
		tel.SampleRatio == nil || *tel.SampleRatio != 0.25 || tel.Resource["deployment.environment"] != "lab" || !tel.ForwardBaggage || !tel.AuditLogs {
		t.Errorf("telemetry = %+v", tel)
	}
	if cfg, err := Parse("robot.yaml", []byte(telemetryServers)); err != nil || cfg.Telemetry.Endpoint != "" || cfg.Telemetry.SampleRatio != nil {
		t.Errorf("without a telemetry section: %+v, %v", cfg.Telemetry, err)
	}
}

// Every problem of the section is reported with its line, and none repeats a secret the file
// should not have held: a password in the URL, a key in its query, a header's value.
func TestTelemetryProblems(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want []want
	}{
		{"  endpoint: ftp://collector:4318\n", []want{{5, "telemetry.endpoint: must start with http://"}}},
		{"  endpoint: http://user:PASSWORD_1@collector:4318\n", []want{{5, "telemetry.endpoint: must not carry credentials"}}},
		{"  endpoint: http://collector:4318/?token=QUERY_SECRET\n", []want{{5, "telemetry.endpoint: must not have a query"}}},
		{"  endpoint: http://collector:4318/#FRAGMENT_SECRET\n", []want{{5, "telemetry.endpoint: must not have a query"}}},
		{"  endpoint: http://\n", []want{{5, "telemetry.endpoint: has no host"}}},
		{"  protocol: grcp\n", []want{{5, `telemetry.protocol: "grcp" is not valid (did you mean "grpc"?)`}}},
		{"  sample_ratio: 2\n", []want{{5, "telemetry.sample_ratio: must be between 0 and 1, got 2"}}},
		{"  sample_ratio: -0.5\n", []want{{5, "telemetry.sample_ratio: must be between 0 and 1"}}},
		{"  sample_ratio: .nan\n", []want{{5, "telemetry.sample_ratio: must be between 0 and 1, got NaN"}}},
		{"  headers_env:\n    x-api-key: \"Bearer LITERAL_SECRET\"\n", []want{{6, "telemetry.headers_env.x-api-key: must name the environment variable"}}},
		{"  headers_env:\n    \"bad header\": KEY\n", []want{{6, `telemetry.headers_env: "bad header" is not an HTTP header name`}}},
		{"  headers_env:\n    x-key: A\n    X-KEY: B\n", []want{{7, `telemetry.headers_env: "x-key" and "X-KEY" are the same HTTP header`}}},
		{"  headers_env:\n    Content-Type: A\n", []want{{6, `"Content-Type" is set by the OTLP exporter itself`}}},
		{"  resource:\n    \" \": x\n", []want{{6, "telemetry.resource: an attribute name must not be empty"}}},
		{"  endpiont: http://collector:4318\n", []want{{5, "endpiont"}}},
	} {
		errs := parseErrors(t, telemetryServers+"telemetry:\n"+c.yaml)
		assertReported(t, errs, c.want)
		for _, secret := range []string{"PASSWORD_1", "QUERY_SECRET", "FRAGMENT_SECRET", "LITERAL_SECRET"} {
			if strings.Contains(errs.Error(), secret) {
				t.Errorf("%q: the message repeats %s: %v", c.yaml, secret, errs)
			}
		}
	}
}
