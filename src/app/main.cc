// trainwatch: parse the command line, then run the chosen subcommand.
#include <sys/resource.h>

#include <cmath>
#include <iostream>

#include "app/agent_cmd.h"
#include "app/check_cmd.h"
#include "app/check_config_cmd.h"
#include "app/demo_cmd.h"
#include "app/flags.h"
#include "app/gpus_cmd.h"
#include "app/logs_cmd.h"
#include "app/query_cmd.h"
#include "app/serve.h"
#include "app/template_cmd.h"
#include "app/wiring.h"
#include "base/clock.h"

namespace {

// As Go programs (Prometheus, VictoriaMetrics) do at start: the soft limit
// on open files up to the hard one, so a store with many log partitions or
// blocks does not fail on the 1024 a shell or unit file leaves by default.
void RaiseOpenFileLimit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// --debug.clock-*: warps the clock before any thread reads it.
void ApplyClock(const trainwatch::app::ClockOptions& c) {
  if (c.speed <= 0) return;
  const int64_t origin = c.origin_s ? std::llround(*c.origin_s * 1000) : trainwatch::NowMillis();
  const int64_t start = c.start_s ? std::llround(*c.start_s * 1000) : origin;
  trainwatch::WarpClock(start, origin, c.speed);
  std::cerr << "trainwatch: the clock is warped (--debug.clock-speed " << c.speed << "): it reads "
            << trainwatch::NowMillis() / 1000 << " (unix seconds) now\n";
}

}  // namespace

int main(int argc, char** argv) {
  trainwatch::app::BlockTerminationSignals();
  RaiseOpenFileLimit();
  auto cl = trainwatch::app::ParseCommandLine(argc, argv);
  if (!cl.ok()) {
    std::cerr << "trainwatch: " << cl.error().message() << "\n";
    return 2;
  }
  ApplyClock(cl->clock);
  switch (cl->command) {
    case trainwatch::app::CommandLine::Command::kServe: return trainwatch::app::RunServe(cl->serve);
    case trainwatch::app::CommandLine::Command::kAgent: return trainwatch::app::RunAgent(cl->agent);
    case trainwatch::app::CommandLine::Command::kQuery: return trainwatch::app::RunQuery(cl->query);
    case trainwatch::app::CommandLine::Command::kCheckRules: return trainwatch::app::RunCheckRules(cl->check_rules);
    case trainwatch::app::CommandLine::Command::kCheckConfig: return trainwatch::app::RunCheckConfig(cl->check_config_files);
    case trainwatch::app::CommandLine::Command::kDemo: return trainwatch::app::RunDemo(cl->demo);
    case trainwatch::app::CommandLine::Command::kImport: return trainwatch::app::RunImport(cl->import);
    case trainwatch::app::CommandLine::Command::kExport: return trainwatch::app::RunExport(cl->export_run);
    case trainwatch::app::CommandLine::Command::kTokenAdd: return trainwatch::app::RunTokenAdd(cl->token_add);
    case trainwatch::app::CommandLine::Command::kLogs: return trainwatch::app::RunLogs(cl->logs);
    case trainwatch::app::CommandLine::Command::kGpus: return trainwatch::app::RunGpus(cl->gpus);
    case trainwatch::app::CommandLine::Command::kTemplateRender:
      return trainwatch::app::RunTemplateRender(cl->template_render);
    case trainwatch::app::CommandLine::Command::kExit:
    case trainwatch::app::CommandLine::Command::kNone: return cl->exit_code;
  }
  return 0;
}
