#include "launcher/ops/metrics.h"

#include <catch2/catch.hpp>

namespace gculaunch {

namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("metrics name the job's ranks, exits and restarts", "[metrics]") {
  double now = 100;
  JobStatus status([&] { return now; });
  status.On(JobEvent::Launch({{"run_id", "a\"b"}, {"max_restarts", 2}, {"host", "h"}}));
  status.On(JobEvent::RankStart(0, 0, 0, 11));
  status.On(JobEvent::RankStart(0, 1, 1, 12));
  status.On(JobEvent::RankExit(0, 1, 1, 12, WorkerExit::Exited(7)));
  status.On(JobEvent::RankExit(0, 0, 0, 11, WorkerExit::Signaled(15)));
  status.On(JobEvent::Restart(1, 2, "x", 0.5));
  status.On(JobEvent::RankStart(1, 0, 0, 21));
  now = 110;
  MetricsInput in;
  in.job = &status.snapshot();
  in.now = now;
  in.progress_age_s = {{0, 2.5}};
  in.process_cpu_s = 1.25;
  in.log_bytes_dropped = 4096;
  in.standbys = {{0, 501, true, 1000}, {1, 502, false, 24}};
  const std::string text = RenderMetrics(in);
  CHECK(Has(text, "gculaunch_standbys{state=\"importing\"} 1"));
  CHECK(Has(text, "gculaunch_standbys{state=\"ready\"} 1"));
  CHECK(Has(text, "gculaunch_standby_pss_bytes 1024"));
  CHECK(Has(text, "# TYPE gculaunch_log_bytes_dropped_total counter"));
  CHECK(Has(text, "gculaunch_log_bytes_dropped_total 4096"));
  CHECK(Has(text, "# TYPE gculaunch_restarts_total counter"));
  CHECK(Has(text, "gculaunch_restarts_total 1"));
  CHECK(Has(text, "gculaunch_ranks_running 1"));
  CHECK(Has(text, "gculaunch_epoch 1"));
  CHECK(Has(text, "gculaunch_rank_exits_total{exit_code=\"7\"} 1"));
  CHECK(Has(text, "gculaunch_rank_exits_total{exit_code=\"143\",signal=\"SIGTERM\"} 1"));
  CHECK(Has(text, "gculaunch_restart_duration_seconds_sum 0.5"));
  CHECK(Has(text, "gculaunch_restart_duration_seconds_count 1"));
  CHECK(Has(text, "gculaunch_rank_last_progress_age_seconds{rank=\"0\"} 2.5"));
  CHECK(Has(text, "gculaunch_rank_uptime_seconds{rank=\"0\",local_rank=\"0\"} 10"));
  CHECK(
      Has(text, "gculaunch_job_info{run_id=\"a\\\"b\",node_rank=\"0\",nnodes=\"1\",host=\"h\"} 1"));
  CHECK(Has(text, "gculaunch_process_cpu_seconds_total 1.25"));
  CHECK(text.find("gculaunch_nodes_present") == std::string::npos);  // not node 0 of a job
  CHECK(text.find("gculaunch_store_") == std::string::npos);         // no store here
}

TEST_CASE("metrics of the store: connections and operations with latency", "[metrics]") {
  JobStatus status([] { return 0.0; });
  rendezvous::StoreMetrics store;
  store.ConnectionAccepted();
  store.Operation(rendezvous::Op::kSet, 0.00005);
  store.Operation(rendezvous::Op::kWait, 2.0);
  MetricsInput in;
  in.job = &status.snapshot();
  in.store = &store;
  in.store_connections_open = 1;
  const std::string text = RenderMetrics(in);
  CHECK(Has(text, "gculaunch_store_connections 1"));
  CHECK(Has(text, "gculaunch_store_connections_total 1"));
  CHECK(Has(text, "gculaunch_store_operations_total{op=\"SET\"} 1"));
  CHECK(Has(text, "gculaunch_store_operation_duration_seconds_bucket{op=\"SET\",le=\"0.0001\"} 1"));
  CHECK(Has(text, "gculaunch_store_operation_duration_seconds_bucket{op=\"WAIT\",le=\"1\"} 0"));
  CHECK(Has(text, "gculaunch_store_operation_duration_seconds_bucket{op=\"WAIT\",le=\"10\"} 1"));
  CHECK(Has(text, "gculaunch_store_operation_duration_seconds_bucket{op=\"WAIT\",le=\"+Inf\"} 1"));
  CHECK(Has(text, "gculaunch_store_operation_duration_seconds_sum{op=\"WAIT\"} 2"));
}

TEST_CASE("metrics of node 0: nodes present, lost and their heartbeats", "[metrics]") {
  double now = 1;
  JobStatus status([&] { return now; });
  status.On(JobEvent::NodeJoin(0, "a", "10.0.0.1"));
  status.On(JobEvent::NodeJoin(1, "b", "10.0.0.2"));
  status.On(JobEvent::Heartbeat(1));
  now = 2.5;
  MetricsInput in;
  in.job = &status.snapshot();
  in.now = now;
  std::string text = RenderMetrics(in);
  CHECK(Has(text, "gculaunch_nodes_present 2"));
  CHECK(Has(text, "gculaunch_node_last_heartbeat_age_seconds{node=\"1\"} 1.5"));
  status.On(JobEvent::NodeLoss(1, "gone"));
  text = RenderMetrics(in);
  CHECK(Has(text, "gculaunch_nodes_present 1"));
  CHECK(Has(text, "gculaunch_nodes_lost 1"));
  CHECK(Has(text, "gculaunch_node_losses_total 1"));
}

TEST_CASE("label values are escaped", "[metrics]") {
  CHECK(EscapeLabelValue("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
}

TEST_CASE("metrics show the restart back-off under way", "[metrics]") {
  JobStatus status([] { return 100.0; });
  status.On(JobEvent::Launch({{"run_id", "r"}, {"max_restarts", 9}}));
  MetricsInput in;
  in.job = &status.snapshot();
  in.now = 100;
  CHECK(Has(RenderMetrics(in), "# TYPE gculaunch_restart_backoff_seconds gauge"));
  CHECK(Has(RenderMetrics(in), "gculaunch_restart_backoff_seconds 0"));
  status.On(JobEvent::Backoff(3, 8, "x"));
  CHECK(Has(RenderMetrics(in), "gculaunch_restart_backoff_seconds 8"));
  status.On(JobEvent::Restart(3, 9, "x", 8.2));
  CHECK(Has(RenderMetrics(in), "gculaunch_restart_backoff_seconds 0"));
}

TEST_CASE("metrics show the cards the health checks found unhealthy", "[metrics]") {
  JobStatus status([] { return 100.0; });
  status.On(JobEvent::Launch({{"run_id", "r"}}));
  MetricsInput in;
  in.job = &status.snapshot();
  in.now = 100;
  CHECK(Has(RenderMetrics(in), "# TYPE gculaunch_node_unhealthy gauge"));
  CHECK(Has(RenderMetrics(in), "gculaunch_node_unhealthy 0"));
  status.On(JobEvent::Unhealthy(1, {"1", "3"}, "nvidia-smi: ..."));
  CHECK(Has(RenderMetrics(in), "gculaunch_node_unhealthy{card=\"1\"} 1"));
  CHECK(Has(RenderMetrics(in), "gculaunch_node_unhealthy{card=\"3\"} 1"));
  CHECK(status.snapshot().unhealthy == "nvidia-smi: ...");
}

TEST_CASE("metrics count the waits for device memory before a restart", "[metrics]") {
  JobStatus status([] { return 100.0; });
  status.On(JobEvent::Launch({{"run_id", "r"}}));
  MetricsInput in;
  in.job = &status.snapshot();
  in.now = 100;
  CHECK(Has(RenderMetrics(in), "gculaunch_device_memory_waits_total 0"));
  status.On(JobEvent::DeviceMemoryWait(1, 2.0, true, {"1"}, "card 1: 3000 MiB"));
  status.On(JobEvent::DeviceMemoryWait(2, 10.0, false, {"1"}, "card 1: 3000 MiB"));
  CHECK(Has(RenderMetrics(in), "gculaunch_device_memory_waits_total 2"));
  CHECK(Has(RenderMetrics(in), "gculaunch_device_memory_held_total 1"));
  CHECK(status.snapshot().device_memory_waits == 2);
  CHECK(status.snapshot().device_memory_held == 1);
}

}  // namespace gculaunch
