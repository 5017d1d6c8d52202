// cl.cpp - tapc's options declared with llvm::cl, exported to C (see cl.h).
//
// Only LLVM Support is linked, statically: it registers a few options of
// its own (help, version, print-options, ...), so names here avoid those.
// -help hides LLVM's generic options and shows tapc's category alone.
#include "config.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Signals.h>
#include <llvm/Support/raw_ostream.h>

#include <string>
#include <vector>

#include "frontend/cl.h"

using namespace llvm;

static cl::OptionCategory Cat("tapc options");

static cl::opt<std::string> Input(cl::Positional, cl::desc("<model.onnx | file.ir>"), cl::cat(Cat));
static cl::opt<std::string> Output("o", cl::desc("Output directory (-emit=c), or file (-emit=ir|plan; default stdout)"),
    cl::value_desc("path"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> MeshOpt("mesh", cl::desc("Device mesh: R nodes x C devices per node (default 1x1)"),
    cl::value_desc("RxC"), cl::init("1x1"), cl::cat(Cat));
static cl::opt<std::string> Emit("emit", cl::desc("What to write: c (a program directory, default), ir (the IR), plan (plan.json), schedule (SVG of the simulated pipeline)"),
    cl::value_desc("c|ir|plan|schedule"), cl::init("c"), cl::cat(Cat));
static cl::opt<bool> MD("MD", cl::desc("Also write a make dependency file (default: the output path + .d)"), cl::cat(Cat));
static cl::opt<std::string> MF("MF", cl::desc("Write the make dependency file to FILE (implies -MD)"),
    cl::value_desc("file"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> Passes("passes", cl::desc("Comma-separated pass pipeline (default: the standard one; see -list-passes)"),
    cl::value_desc("a,b,c"), cl::init(""), cl::cat(Cat));
static cl::list<std::string> PrintBefore("print-before", cl::desc("Print the IR to stderr before these passes"),
    cl::CommaSeparated, cl::value_desc("pass,..."), cl::cat(Cat));
static cl::list<std::string> PrintAfter("print-after", cl::desc("Print the IR to stderr after these passes"),
    cl::CommaSeparated, cl::value_desc("pass,..."), cl::cat(Cat));
static cl::opt<bool> PrintBeforeAll("print-before-all", cl::desc("Print the IR to stderr before every pass"), cl::cat(Cat));
static cl::opt<bool> PrintAfterAll("print-after-all", cl::desc("Print the IR to stderr after every pass"), cl::cat(Cat));
static cl::opt<std::string> StopAfter("stop-after", cl::desc("Stop the pipeline after this pass and emit"),
    cl::value_desc("pass"), cl::init(""), cl::cat(Cat));
static cl::opt<bool> TimePasses("time-passes", cl::desc("Print a table of per-pass times to stderr"), cl::cat(Cat));
static cl::opt<bool> NoFuse("O0", cl::desc("Plan only: the default pipeline without the kernel fusion passes"),
    cl::cat(Cat));
static cl::opt<bool> VerifyEach("verify-each", cl::desc("Run the verifier after every pass"), cl::cat(Cat));
static cl::opt<std::string> IRDumpDir("ir-dump-dir", cl::desc("Write the IR after each pass to DIR/NN-pass.ir"),
    cl::value_desc("dir"), cl::init(""), cl::cat(Cat));
static cl::opt<long long> Batch("batch", cl::desc("Specialize the batch dimension (dim 0 of the inputs) to N"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<long long> MaxModelSize("max-model-size", cl::desc("Refuse model files larger than this many bytes (default 2 GiB)"),
    cl::value_desc("bytes"), cl::init(0), cl::cat(Cat));
static cl::opt<int> MinDuplicate("min-duplicate", cl::desc("fold-scopes: a block must repeat at least N times to become a template (default 2)"),
    cl::value_desc("N"), cl::init(2), cl::cat(Cat));
static cl::opt<int> DP("dp", cl::desc("Force the data-parallel degree: replicas, each with batch/N of the batch (default: Megatron's rule)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<int> TP("tp", cl::desc("Force the tensor-parallel degree (default: Megatron's rule, inside a mesh row)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<int> PP("pp", cl::desc("Force the pipeline degree: N stages (default: Megatron's rule, across mesh rows)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<int> Microbatches("microbatches", cl::desc("Micro-batches per replica per iteration (default: the largest divisor of the replica's batch up to 2 x stages; 1 without a pipeline)"),
    cl::value_desc("M"), cl::init(0), cl::cat(Cat));
static cl::opt<std::string> Cluster("cluster", cl::desc("Read the cost model's per-device constants from FILE: KEY=VALUE lines as for -cost, # comments (-cost overrides)"),
    cl::value_desc("file"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> Cost("cost", cl::desc("Cost model constants: flops, bw_intra, bw_inter, latency, memory, objective=train|infer (docs/tensor-parallel.md)"),
    cl::value_desc("key=value,..."), cl::init(""), cl::cat(Cat));
static cl::opt<unsigned> TPRandom("tp-random", cl::desc("Testing: pick a random valid tensor-parallel plan (seed N) instead of the cheapest"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat), cl::Hidden);
static cl::opt<std::string> ModelOpt("model", cl::desc("For an IR input: the model whose weights it names (default: its header's model=, which must be inside the current directory)"),
    cl::value_desc("file"), cl::init(""), cl::cat(Cat));
static cl::list<std::string> DimOpt("dim", cl::desc("Give the symbolic dimension NAME (an ONNX dim_param) the value N wherever it appears (repeatable)"),
    cl::value_desc("NAME=N"), cl::ZeroOrMore, cl::cat(Cat));
static cl::list<std::string> InputShape("input-shape", cl::desc("Pin input NAME's whole shape, e.g. -input-shape x=1x3x224x224 (repeatable)"),
    cl::value_desc("NAME=AxBxC"), cl::ZeroOrMore, cl::cat(Cat));
static cl::opt<bool> ListPasses("list-passes", cl::desc("List the registered passes and exit"), cl::cat(Cat));

static std::string
join(const cl::list<std::string> &l)
{
	std::string s;
	for (const auto &x : l) {
		if (!s.empty())
			s += ",";
		s += x;
	}
	return s;
}

static std::string print_before_s, print_after_s;
static std::vector<const char *> dim_v, shape_v;

extern "C" bool
cl_parse(int argc, char **argv, const char *overview, const char *extra, TapcOptions *o)
{
	sys::PrintStackTraceOnErrorSignal(argv[0]);
	cl::HideUnrelatedOptions(Cat);
	cl::SetVersionPrinter([](raw_ostream &os) { os << PACKAGE_STRING << "\n"; });
	static cl::extrahelp More(extra);
	if (!cl::ParseCommandLineOptions(argc, argv, overview, &errs()))
		return false;
	print_before_s = join(PrintBefore);
	print_after_s = join(PrintAfter);
	o->input = Input.c_str();
	o->output = Output.c_str();
	o->mesh = MeshOpt.c_str();
	o->emit = Emit.c_str();
	o->passes = Passes.c_str();
	o->print_before = print_before_s.c_str();
	o->print_after = print_after_s.c_str();
	o->print_before_all = PrintBeforeAll;
	o->print_after_all = PrintAfterAll;
	o->stop_after = StopAfter.c_str();
	o->time_passes = TimePasses;
	o->no_fuse = NoFuse;
	o->verify_each = VerifyEach;
	o->ir_dump_dir = IRDumpDir.c_str();
	o->batch = Batch;
	o->max_model_size = MaxModelSize;
	o->list_passes = ListPasses;
	o->min_duplicate = MinDuplicate;
	o->dp = DP;
	o->tp = TP;
	o->pp = PP;
	o->microbatches = Microbatches;
	o->cost = Cost.c_str();
	o->cluster = Cluster.c_str();
	o->tp_random = TPRandom;
	o->md = MD || !MF.empty();
	o->mf = MF.c_str();
	o->model = ModelOpt.c_str();
	for (const auto &d : DimOpt)
		dim_v.push_back(d.c_str());
	for (const auto &d : InputShape)
		shape_v.push_back(d.c_str());
	o->ndim = (int)dim_v.size();
	o->dim = dim_v.data();
	o->ninput_shape = (int)shape_v.size();
	o->input_shape = shape_v.data();
	return true;
}
