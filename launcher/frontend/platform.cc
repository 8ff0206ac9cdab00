#include "launcher/frontend/platform.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/text.h"

namespace gculaunch {
namespace {

constexpr long long kMaxNodes = 1 << 20;      // as ParseCli's --nnodes
constexpr long long kMaxProcesses = 1 << 24;  // as MakeLaunchSpec's world-size limit
constexpr size_t kMaxHosts = 1 << 20;         // a host list longer than this is an error

// The variables Slurm sets in a job step (srun) and outside one (salloc, sbatch).
constexpr const char* kSlurmStepIds[] = {"SLURM_STEP_ID", "SLURM_STEPID"};
constexpr const char* kSlurmTaskCounts[] = {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"};
constexpr const char* kSlurmNodeCounts[] = {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"};
constexpr const char* kSlurmNodeLists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                           "SLURM_NODELIST"};
// Set by a launcher for the processes it starts: WORLD_SIZE/RANK next to them
// are that launcher's, not a job platform's.
constexpr const char* kParentLauncherMarks[] = {"TORCHELASTIC_RUN_ID", "LOCAL_RANK"};

bool IsHostText(std::string_view text) {
  return !text.empty() && std::none_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isspace(c) != 0 || std::iscntrl(c) != 0;
  });
}

// ---- Slurm host lists ----

// One name of a host list ("node[01-02]-ib"): literal text and bracket groups.
Result<std::vector<std::string>> ExpandHostName(std::string_view name) {
  if (name.empty()) return Error{"empty host name", ""};
  if (!IsHostText(name)) return Error{"'" + std::string(name) + "' contains a space", ""};
  std::vector<std::string> hosts = {""};
  size_t at = 0;
  while (at < name.size()) {
    const size_t open = name.find('[', at);
    const std::string literal(
        name.substr(at, open == std::string_view::npos ? name.npos : open - at));
    for (std::string& host : hosts) host += literal;
    if (open == std::string_view::npos) break;
    const size_t close = name.find(']', open);  // nesting was ruled out by the caller
    const std::string_view group = name.substr(open + 1, close - open - 1);
    if (group.empty()) return Error{"empty '[]' in '" + std::string(name) + "'", ""};
    std::vector<std::string> items;
    size_t begin = 0;
    while (true) {
      const size_t comma = group.find(',', begin);
      const std::string item(
          group.substr(begin, comma == std::string_view::npos ? group.npos : comma - begin));
      if (item.empty()) return Error{"empty item in '[" + std::string(group) + "]'", ""};
      const size_t dash = item.find('-');
      const std::string lo_text = item.substr(0, dash);
      const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
      auto is_number = [](const std::string& text) {
        return !text.empty() && text.size() <= 18 &&
               std::all_of(text.begin(), text.end(),
                           [](unsigned char c) { return std::isdigit(c) != 0; });
      };
      const bool digits = is_number(lo_text) && is_number(hi_text);
      if (!digits) return Error{"'" + item + "' is not a number or a range such as 01-04", ""};
      const long long lo = *ParseInteger(lo_text);
      const long long hi = *ParseInteger(hi_text);
      if (hi < lo) return Error{"range '" + item + "' runs backwards", ""};
      if (static_cast<unsigned long long>(hi - lo) >= kMaxHosts ||
          items.size() + static_cast<size_t>(hi - lo) >= kMaxHosts) {
        return Error{"it expands to more than " + std::to_string(kMaxHosts) + " hosts", ""};
      }
      // Slurm pads every number to the width of the range's first one.
      for (long long n = lo; n <= hi; ++n) {
        std::string text = std::to_string(n);
        if (text.size() < lo_text.size()) text.insert(0, lo_text.size() - text.size(), '0');
        items.push_back(std::move(text));
      }
      if (comma == std::string_view::npos) break;
      begin = comma + 1;
    }
    if (hosts.size() * items.size() > kMaxHosts) {
      return Error{"it expands to more than " + std::to_string(kMaxHosts) + " hosts", ""};
    }
    std::vector<std::string> product;
    product.reserve(hosts.size() * items.size());
    for (const std::string& host : hosts) {
      for (const std::string& item : items) product.push_back(host + item);
    }
    hosts = std::move(product);
    at = close + 1;
  }
  return hosts;
}

// ---- reading the environment ----

class Reader {
 public:
  Reader(const EnvMap& env, const CliOptions& o) : env_(env), o_(o) {}

  Result<PlatformInfo> Read() {
    if (o_.standalone) {
      Standalone();
      return std::move(p_);
    }
    const bool slurm = Has(kSlurmStepIds);
    const bool mpi = Has("OMPI_COMM_WORLD_SIZE") || Has("OMPI_COMM_WORLD_RANK");
    const bool world = Has("WORLD_SIZE") || Has("RANK");
    if (!slurm && Has("SLURM_JOB_ID") && NeedTopology()) {
      p_.notes.push_back(Assign("SLURM_JOB_ID") +
                         " is set but SLURM_STEP_ID is not: outside an srun step gculaunch does "
                         "not read Slurm's variables (start it with srun --ntasks-per-node=1 to "
                         "run on every node of the allocation)");
    }
    Status read = OkStatus();
    std::string level;
    if (slurm) {
      level = "Slurm step";
      read = ReadSlurm();
      if (read.ok() && mpi) read = CheckMpiAgrees();
      NotRead(MpiVars(), "the Slurm step gives the layout");
      // MASTER_ADDR too, when the node list names the master instead.
      NotRead(WorldVars(/*with_addr=*/NeedAddr(), /*with_port=*/false),
              "the Slurm step gives the layout");
    } else if (mpi) {
      level = "Open MPI";
      read = ReadMpi();
      NotRead(WorldVars(false, false), "Open MPI's variables give the layout");
    } else if (world && GuardsPass()) {
      level = "WORLD_SIZE/RANK";
      read = ReadWorldSize();
    }
    if (!read.ok()) return read.error();
    if (p_.nnodes || p_.node_rank || p_.master_addr || p_.master_port) p_.name = level;
    if (Status ok = CheckRank(); !ok.ok()) return ok.error();
    if (o_.platform_world_size && !world_size_read_) {
      p_.notes.push_back(DescribeFlag(o_, "platform-world-size", WorldSizeReading()) +
                         " has no effect: WORLD_SIZE is not read");
    }
    return std::move(p_);
  }

 private:
  // ---- what the flags and PET_* variables leave open ----
  bool NeedNodes() const { return !o_.nnodes; }
  bool NeedRank() const { return !o_.node_rank; }
  bool NeedTopology() const { return NeedNodes() || NeedRank(); }
  bool NeedAddr() const { return !o_.master_addr && !o_.rdzv_endpoint; }
  bool NeedPort() const { return !o_.master_port && !o_.rdzv_endpoint; }
  int EffectiveNodes() const { return o_.nnodes ? *o_.nnodes : p_.nnodes.value_or(1); }

  // ---- variables (an empty one counts as unset) ----
  std::optional<std::string> Var(std::string_view name) const {
    auto value = env_.Get(name);
    if (!value || value->empty()) return std::nullopt;
    return value;
  }
  bool Has(std::string_view name) const { return Var(name).has_value(); }
  template <size_t N>
  bool Has(const char* const (&names)[N]) const {
    return First(names) != nullptr;
  }
  // The first of `names` that is set, or nullptr.
  template <size_t N>
  const char* First(const char* const (&names)[N]) const {
    for (const char* name : names) {
      if (Has(name)) return name;
    }
    return nullptr;
  }
  // "NAME=value" as read.
  std::string Assign(std::string_view name) const {
    return std::string(name) + "=" + Var(name).value_or("");
  }
  // The set ones of `names`, as NAME=value.
  std::vector<std::string> Present(std::initializer_list<const char*> names) const {
    std::vector<std::string> out;
    for (const char* name : names) {
      if (Has(name)) out.push_back(Assign(name));
    }
    return out;
  }

  // `name`'s value as an integer in [min, max].
  Result<int> Integer(std::string_view name, long long min, long long max,
                      const std::string& expected, const std::string& hint) const {
    const std::string value = Var(name).value_or("");
    auto number = ParseInteger(value);
    if (!number || *number < min || *number > max) {
      return Error{std::string(name) + " '" + value + "': expected " + expected, hint};
    }
    return static_cast<int>(*number);
  }

  Status ReadMasterAddr() {
    const std::string value = *Var("MASTER_ADDR");
    std::string addr = value;
    if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') {
      addr = addr.substr(1, addr.size() - 2);
    }
    if (!IsHostText(addr) || addr.find_first_of("[]") != std::string::npos) {
      return Error{"MASTER_ADDR '" + value + "': expected a host name or IP address",
                   "fix MASTER_ADDR, or give --master-addr HOST"};
    }
    p_.master_addr = addr;
    p_.master_addr_from = "MASTER_ADDR";
    return OkStatus();
  }

  Status ReadMasterPort() {
    if (!NeedPort() || !Has("MASTER_PORT")) return OkStatus();
    auto port = Integer("MASTER_PORT", 1, 65535, "a port number 1-65535",
                        "fix MASTER_PORT, or give --master-port PORT");
    if (!port.ok()) return port.error();
    p_.master_port = *port;
    p_.master_port_from = "MASTER_PORT";
    return OkStatus();
  }

  // ---- level 3: a Slurm step ----
  Status ReadSlurm() {
    const std::string srun_hint = "start gculaunch with srun --ntasks-per-node=1";
    const char* nodes_var = First(kSlurmNodeCounts);
    std::optional<int> step_nodes;
    if (nodes_var != nullptr && (NeedTopology() || NeedAddr())) {
      auto nodes = Integer(nodes_var, 1, kMaxNodes, "the number of nodes in the step",
                           srun_hint + ", or give --nnodes N");
      if (!nodes.ok()) return nodes.error();
      step_nodes = *nodes;
    }
    const char* tasks_var = First(kSlurmTaskCounts);
    NotRead({NeedNodes() ? nullptr : tasks_var, NeedRank() ? nullptr : "SLURM_PROCID"});
    if (NeedTopology()) {
      if (tasks_var == nullptr) {
        return Error{
            "SLURM_STEP_ID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS "
            "is: gculaunch cannot tell how many nodes run the step",
            srun_hint + ", or give --nnodes N"};
      }
      auto tasks = Integer(tasks_var, 1, kMaxNodes, "the number of tasks in the step",
                           srun_hint + ", or give --nnodes N");
      if (!tasks.ok()) return tasks.error();
      if (step_nodes && *tasks != *step_nodes) {
        return Error{"srun started " + Plural(*tasks, "task") + " on " +
                         Plural(*step_nodes, "node") + " (" + Assign(tasks_var) + ", " +
                         Assign(nodes_var) + "), but gculaunch runs once per node",
                     "srun --ntasks-per-node=1 gculaunch ... (gculaunch starts each node's "
                     "ranks itself)"};
      }
      if (!Has("SLURM_PROCID")) {
        return Error{
            "SLURM_STEP_ID is set but SLURM_PROCID is not: gculaunch cannot tell "
            "which node this is",
            srun_hint + ", or give --node-rank N"};
      }
      auto procid = Integer("SLURM_PROCID", 0, kMaxNodes, "this task's index, an integer from 0",
                            srun_hint + ", or give --node-rank N");
      if (!procid.ok()) return procid.error();
      if (NeedNodes()) {
        p_.nnodes = *tasks;
        p_.nnodes_from = Assign(tasks_var);
        nodes_name_ = tasks_var;
      }
      if (NeedRank()) {
        p_.node_rank = *procid;
        p_.node_rank_from = Assign("SLURM_PROCID");
        rank_name_ = "SLURM_PROCID";
      }
    }
    if (NeedAddr()) {
      const char* list_var = First(kSlurmNodeLists);
      const std::string master_hint = "give --master-addr HOST (the host of SLURM_PROCID 0)";
      if (list_var == nullptr) {
        if (EffectiveNodes() > 1) {
          return Error{"the job has " + Plural(EffectiveNodes(), "node") + " (" + NodesFrom() +
                           ") but neither SLURM_STEP_NODELIST nor "
                           "SLURM_JOB_NODELIST is set to name the master",
                       master_hint};
        }
      } else {
        const std::string list = *Var(list_var);
        auto hosts = ExpandSlurmHostList(list);
        if (!hosts.ok()) {
          return Error{std::string(list_var) + " '" + list + "': " + hosts.error().what,
                       master_hint};
        }
        if (std::string_view(list_var) == "SLURM_STEP_NODELIST" && nodes_var != nullptr &&
            std::string_view(nodes_var) == "SLURM_STEP_NUM_NODES" &&
            hosts->size() != static_cast<size_t>(*step_nodes)) {
          return Error{std::string(list_var) + " '" + list + "' names " +
                           Plural(static_cast<long long>(hosts->size()), "host") + " but " +
                           Assign(nodes_var),
                       master_hint};
        }
        p_.master_addr = hosts->front();
        p_.master_addr_from = "first host of " + std::string(list_var);
      }
    }
    return ReadMasterPort();
  }

  // ---- level 4: Open MPI ----
  Status ReadMpi() {
    const std::string mpirun_hint = "start gculaunch with mpirun --map-by ppr:1:node";
    NotRead({NeedNodes() ? nullptr : "OMPI_COMM_WORLD_SIZE",
             NeedRank() ? nullptr : "OMPI_COMM_WORLD_RANK"});
    if (NeedTopology()) {
      for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}) {
        if (!Has(name)) {
          const std::string other = std::string_view(name) == "OMPI_COMM_WORLD_SIZE"
                                        ? "OMPI_COMM_WORLD_RANK"
                                        : "OMPI_COMM_WORLD_SIZE";
          return Error{other + " is set but " + name + " is not", mpirun_hint};
        }
      }
      auto size = Integer("OMPI_COMM_WORLD_SIZE", 1, kMaxNodes, "the number of copies started",
                          mpirun_hint + ", or give --nnodes N");
      if (!size.ok()) return size.error();
      auto rank =
          Integer("OMPI_COMM_WORLD_RANK", 0, kMaxNodes, "this copy's index, an integer from 0",
                  mpirun_hint + ", or give --node-rank N");
      if (!rank.ok()) return rank.error();
      if (Has("OMPI_COMM_WORLD_LOCAL_SIZE")) {
        auto local = Integer("OMPI_COMM_WORLD_LOCAL_SIZE", 1, kMaxNodes,
                             "the number of copies on this node", mpirun_hint);
        if (!local.ok()) return local.error();
        if (*local > 1) {
          return Error{
              "mpirun started " + std::to_string(*local) + " copies of gculaunch on this node (" +
                  Assign("OMPI_COMM_WORLD_LOCAL_SIZE") + "), but gculaunch runs once per node",
              "mpirun --map-by ppr:1:node gculaunch ... (gculaunch starts each node's "
              "ranks itself)"};
        }
      }
      if (NeedNodes()) {
        p_.nnodes = *size;
        p_.nnodes_from = Assign("OMPI_COMM_WORLD_SIZE");
        nodes_name_ = "OMPI_COMM_WORLD_SIZE";
      }
      if (NeedRank()) {
        p_.node_rank = *rank;
        p_.node_rank_from = Assign("OMPI_COMM_WORLD_RANK");
        rank_name_ = "OMPI_COMM_WORLD_RANK";
      }
    }
    if (NeedAddr()) {
      if (Has("MASTER_ADDR")) {
        if (Status ok = ReadMasterAddr(); !ok.ok()) return ok;
      } else if (EffectiveNodes() > 1) {
        return Error{"the job has " + Plural(EffectiveNodes(), "node") + " (" + NodesFrom() +
                         ") but MASTER_ADDR is not set to name the master",
                     "pass node 0's address to every copy (mpirun -x MASTER_ADDR=HOST ...), or "
                     "give --master-addr HOST"};
      }
    }
    return ReadMasterPort();
  }

  // mpirun inside a Slurm allocation: its variables describe gculaunch's own
  // copies, the step may describe mpirun's daemons.  Both must say the same.
  Status CheckMpiAgrees() const {
    if (!p_.nnodes && !p_.node_rank) return OkStatus();
    auto size = ParseInteger(Var("OMPI_COMM_WORLD_SIZE").value_or(""));
    auto rank = ParseInteger(Var("OMPI_COMM_WORLD_RANK").value_or(""));
    const bool nodes_differ = p_.nnodes && size && *size != *p_.nnodes;
    const bool rank_differs = p_.node_rank && rank && *rank != *p_.node_rank;
    if (!nodes_differ && !rank_differs) return OkStatus();
    return Error{"the Slurm step (" + Join(SlurmTopologyVars(), ", ") + ") and Open MPI (" +
                     Join(Present({"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}), ", ") +
                     ") disagree about this node",
                 "start gculaunch with srun --ntasks-per-node=1 rather than mpirun inside a "
                 "Slurm allocation, or give --nnodes and --node-rank"};
  }

  std::vector<std::string> SlurmTopologyVars() const {
    std::vector<std::string> out = Present({"SLURM_PROCID"});
    if (const char* tasks = First(kSlurmTaskCounts)) out.push_back(Assign(tasks));
    return out;
  }

  std::vector<std::string> MpiVars() const {
    return Present({"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"});
  }

  std::vector<std::string> WorldVars(bool with_addr, bool with_port) const {
    std::vector<std::string> out = Present({"WORLD_SIZE", "RANK"});
    if (with_addr && Has("MASTER_ADDR")) out.push_back(Assign("MASTER_ADDR"));
    if (with_port && Has("MASTER_PORT")) out.push_back(Assign("MASTER_PORT"));
    return out;
  }

  // ---- level 5: WORLD_SIZE / RANK ----

  // The stray-variable guards.  False (with a warning, or a note when the
  // flags give the topology anyway) when the variables are not a platform's.
  bool GuardsPass() {
    std::string reason;
    std::vector<std::string> vars;
    for (const char* mark : kParentLauncherMarks) {
      if (Has(mark)) {
        vars = WorldVars(/*with_addr=*/true, /*with_port=*/true);
        reason = std::string(mark) + " is set, so " +
                 (vars.size() == 1 ? "it belongs" : "they belong") +
                 " to the launcher that started this process (torchrun or gculaunch), not to "
                 "a job platform (give --nnodes, --node-rank and --master-addr to join a "
                 "multi-node job)";
        break;
      }
    }
    if (reason.empty() && !Has("MASTER_ADDR")) {
      vars = WorldVars(/*with_addr=*/false, /*with_port=*/true);
      reason = std::string("MASTER_ADDR is not set, so ") +
               (vars.size() == 1 ? "it looks" : "they look") +
               " left over in this shell rather than set by a job platform (set MASTER_ADDR to "
               "use them, or give --nnodes, --node-rank and --master-addr)";
    }
    if (reason.empty()) return true;
    if (NeedTopology()) {
      p_.warnings.push_back(JoinAnd(vars) + (vars.size() == 1 ? " is" : " are") +
                            " ignored: " + reason);
    } else {
      NotRead({"WORLD_SIZE", "RANK"});
    }
    return false;
  }

  std::string WorldSizeReading() const {
    return o_.platform_world_size == PlatformWorldSize::kProcs ? "procs" : "nodes";
  }

  Status ReadWorldSize() {
    const bool procs = o_.platform_world_size == PlatformWorldSize::kProcs;
    if (NeedNodes()) {
      if (Has("WORLD_SIZE")) {
        if (Status ok = ReadWorldSizeCount(procs); !ok.ok()) return ok;
      } else {
        return Error{Assign("RANK") +
                         " is set but WORLD_SIZE is not: gculaunch cannot tell "
                         "how many nodes there are",
                     "set WORLD_SIZE to the number of nodes, or give --nnodes N"};
      }
    }
    if (NeedRank()) {
      if (Has("RANK")) {
        auto rank = Integer("RANK", 0, kMaxNodes, "this node's index, an integer from 0",
                            "fix RANK, or give --node-rank N");
        if (!rank.ok()) return rank.error();
        p_.node_rank = *rank;
        p_.node_rank_from = Assign("RANK");
        rank_name_ = "RANK";
      } else if (EffectiveNodes() > 1) {
        return Error{NodesFrom() +
                         " is set but RANK is not: gculaunch cannot tell which node "
                         "this is",
                     "set RANK to this node's index (0 on the master node), or give --node-rank N"};
      }
    }
    NotRead({NeedNodes() ? nullptr : "WORLD_SIZE", NeedRank() ? nullptr : "RANK"});
    if (NeedAddr()) {
      if (Status ok = ReadMasterAddr(); !ok.ok()) return ok;
    }
    return ReadMasterPort();
  }

  Status ReadWorldSizeCount(bool procs) {
    const std::string reading = DescribeFlag(o_, "platform-world-size", "procs");
    auto world = Integer("WORLD_SIZE", 1, procs ? kMaxProcesses : kMaxNodes,
                         procs ? "the number of processes, a positive integer"
                               : "the number of nodes, a positive integer",
                         "fix WORLD_SIZE, or give --nnodes N");
    if (!world.ok()) return world.error();
    world_size_read_ = true;
    nodes_name_ = "WORLD_SIZE";
    if (!procs) {
      p_.nnodes = *world;
      p_.nnodes_from = Assign("WORLD_SIZE") + " (nodes)";
      return OkStatus();
    }
    const std::string what = Assign("WORLD_SIZE") + " read as processes (" + reading + ")";
    if (!o_.nproc_per_node) {
      return Error{what + " needs --nproc-per-node N to count the nodes",
                   "give --nproc-per-node N (the ranks on each node), or --nnodes N"};
    }
    if (o_.nproc_per_node->kind != NprocPerNode::Kind::kCount) {
      const NprocPerNode::Kind kind = o_.nproc_per_node->kind;
      const std::string value = kind == NprocPerNode::Kind::kAuto  ? "auto"
                                : kind == NprocPerNode::Kind::kGpu ? "gpu"
                                                                   : "cpu";
      return Error{what + " needs a number of ranks per node to count the nodes, not " +
                       DescribeFlag(o_, "nproc-per-node", value),
                   "give --nproc-per-node N, or --nnodes N"};
    }
    const int nproc = o_.nproc_per_node->count;
    const std::string nproc_from = DescribeFlag(o_, "nproc-per-node", std::to_string(nproc));
    if (*world % nproc != 0) {
      return Error{Assign("WORLD_SIZE") + " read as processes is not a multiple of " + nproc_from +
                       " (read as nodes it would be " + Plural(*world, "node") + ")",
                   "check " + o_.Source("nproc-per-node") +
                       ", or use --platform-world-size nodes if WORLD_SIZE counts nodes"};
    }
    p_.nnodes = *world / nproc;
    p_.nnodes_from = Assign("WORLD_SIZE") + " (processes, " + std::to_string(nproc) + " per node)";
    procs_ = true;
    return OkStatus();
  }

  // ---- checks and notes ----

  // The node rank against the number of nodes, when either came from the
  // platform (MakeLaunchSpec checks flags against flags).
  Status CheckRank() const {
    if (!p_.nnodes && !p_.node_rank) return OkStatus();
    const int nodes = EffectiveNodes();
    const int rank = o_.node_rank ? *o_.node_rank : p_.node_rank.value_or(0);
    if (rank < nodes) return OkStatus();
    const std::string rank_from =
        o_.node_rank ? DescribeFlag(o_, "node-rank", std::to_string(rank)) : p_.node_rank_from;
    const std::string rank_name = o_.node_rank ? o_.Source("node-rank") : rank_name_;
    const std::string nodes_name = o_.nnodes ? o_.Source("nnodes") : nodes_name_;
    std::vector<std::string> check = {rank_name, nodes_name};
    if (procs_ && !o_.nnodes) check.push_back(o_.Source("nproc-per-node"));
    return Error{rank_from + " is not a node of this job: " + NodesFrom() +
                     " gives node ranks 0 to " + std::to_string(nodes - 1),
                 "check " + JoinAnd(check)};
  }

  // Where the number of nodes comes from, as messages name it.
  std::string NodesFrom() const {
    if (o_.nnodes) return DescribeFlag(o_, "nnodes", std::to_string(*o_.nnodes));
    return p_.nnodes_from.empty() ? "1 node (default)" : p_.nnodes_from;
  }

  // A note for platform variables of the chosen level that the flags or PET_*
  // variables override (nullptr entries are skipped).
  void NotRead(std::initializer_list<const char*> names) {
    std::vector<std::string> vars;
    std::vector<std::string> by;
    for (const char* name : names) {
      if (name == nullptr || !Has(name)) continue;
      vars.push_back(Assign(name));
      const bool count = std::string_view(name) != "RANK" &&
                         std::string_view(name) != "SLURM_PROCID" &&
                         std::string_view(name) != "OMPI_COMM_WORLD_RANK";
      const std::string source = o_.Source(count ? "nnodes" : "node-rank");
      if (std::find(by.begin(), by.end(), source) == by.end()) by.push_back(source);
    }
    if (vars.empty()) return;
    p_.notes.push_back(JoinAnd(vars) + (vars.size() == 1 ? " is" : " are") + " not read: " +
                       JoinAnd(by) + (by.size() == 1 ? " takes" : " take") + " precedence");
  }

  // A note for a lower level's variables.
  void NotRead(const std::vector<std::string>& vars, const std::string& why) {
    if (vars.empty()) return;
    p_.notes.push_back(JoinAnd(vars) + (vars.size() == 1 ? " is" : " are") + " not read: " + why);
  }

  // --standalone: nothing is read; say what was ignored.
  void Standalone() {
    std::vector<std::string> vars = WorldVars(/*with_addr=*/true, /*with_port=*/true);
    bool several = false;
    auto counts_several = [&](const char* name) {
      auto n = ParseInteger(Var(name).value_or(""));
      several = several || (n && *n > 1);
    };
    counts_several("WORLD_SIZE");
    if (Has(kSlurmStepIds)) {
      const std::vector<std::string> slurm = SlurmTopologyVars();
      vars.insert(vars.end(), slurm.begin(), slurm.end());
      if (const char* tasks = First(kSlurmTaskCounts)) counts_several(tasks);
    }
    const std::vector<std::string> mpi = MpiVars();
    vars.insert(vars.end(), mpi.begin(), mpi.end());
    counts_several("OMPI_COMM_WORLD_SIZE");
    if (vars.empty()) return;
    std::string text = o_.Source("standalone") + " ignores the job platform's " + JoinAnd(vars) +
                       ": this node runs a job of its own";
    (several ? p_.warnings : p_.notes).push_back(std::move(text));
  }

  const EnvMap& env_;
  const CliOptions& o_;
  PlatformInfo p_;
  std::string nodes_name_;  ///< the variable the number of nodes came from ("WORLD_SIZE")
  std::string rank_name_;   ///< the variable the node rank came from ("RANK")
  bool procs_ = false;      ///< WORLD_SIZE was read as processes
  bool world_size_read_ = false;
};

}  // namespace

Result<std::vector<std::string>> ExpandSlurmHostList(std::string_view list) {
  if (list.empty()) return Error{"empty host list", ""};
  std::vector<std::string> hosts;
  size_t begin = 0;
  int depth = 0;
  for (size_t at = 0; at <= list.size(); ++at) {
    const char c = at < list.size() ? list[at] : ',';
    if (c == '[') {
      if (depth > 0) return Error{"nested '['", ""};
      depth = 1;
    } else if (c == ']') {
      if (depth == 0) return Error{"']' without '['", ""};
      depth = 0;
    } else if (c == ',' && (depth == 0 || at == list.size())) {
      if (depth > 0) return Error{"unclosed '['", ""};
      auto expanded = ExpandHostName(list.substr(begin, at - begin));
      if (!expanded.ok()) return expanded.error();
      if (hosts.size() + expanded->size() > kMaxHosts) {
        return Error{"it expands to more than " + std::to_string(kMaxHosts) + " hosts", ""};
      }
      hosts.insert(hosts.end(), expanded->begin(), expanded->end());
      begin = at + 1;
    }
  }
  return hosts;
}

Result<PlatformInfo> ReadPlatform(const EnvMap& env, const CliOptions& options) {
  return Reader(env, options).Read();
}

}  // namespace gculaunch
