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
static cl::opt<std::string> Output("o", cl::desc("Output directory (-emit=c), or file (the other -emit kinds; default or -: stdout; -emit=ir also writes FILE.weights)"),
    cl::value_desc("path"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> MeshOpt("mesh", cl::desc("Device mesh: R nodes x C devices per node, alike (default 1x1; -cluster for any cluster)"),
    cl::value_desc("RxC"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> Emit("emit", cl::desc("What to write: c (a program directory, default), ir (the IR), plan (plan.json), schedule (SVG: the placement and the simulated pipeline), search (the planner's table)"),
    cl::value_desc("c|ir|plan|schedule|search"), cl::init("c"), cl::cat(Cat));
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
static cl::opt<bool> NoFuse("O0", cl::desc("The default pipeline without the kernel fusion passes: the plan, and a program of unfused kernels"),
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
static cl::opt<int> DP("dp", cl::desc("Force the data-parallel degree: replicas, each with batch/N of the batch (default: searched)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<int> TP("tp", cl::desc("Force the tensor-parallel degree (default: searched)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<int> PP("pp", cl::desc("Force the pipeline degree: N stages (default: searched)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<int> Microbatches("microbatches", cl::desc("Force the micro-batches per replica per iteration (default: searched)"),
    cl::value_desc("M"), cl::init(0), cl::cat(Cat));
static cl::opt<std::string> Cluster("cluster", cl::desc("Plan for the cluster FILE describes (JSON: kinds of nodes, their devices' FLOP/s, memory and links; docs/planner.md)"),
    cl::value_desc("file"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> Cost("cost", cl::desc("The -mesh's devices: flops, bw_intra, bw_inter, latency, memory, op_latency, mem_bw; and objective=train|infer (docs/planner.md)"),
    cl::value_desc("key=value,..."), cl::init(""), cl::cat(Cat));
static cl::opt<bool> Train("train", cl::desc("Compile a training program: loss, backward pass, optimizer step (docs/training.md)"),
    cl::cat(Cat));
static cl::opt<std::string> Loss("loss", cl::desc("The loss -train minimizes: cross_entropy (over the last axis of the first output, int64 labels) or mse"),
    cl::value_desc("cross_entropy|mse"), cl::init("cross_entropy"), cl::cat(Cat));
static cl::opt<std::string> Optimizer("optimizer", cl::desc("The optimizer of -train: sgd or adamw (torch.optim's update rules)"),
    cl::value_desc("sgd|adamw"), cl::init("sgd"), cl::cat(Cat));
static cl::opt<double> LR("lr", cl::desc("Learning rate (default 1e-3)"), cl::value_desc("x"), cl::init(1e-3), cl::cat(Cat));
static cl::opt<double> Momentum("momentum", cl::desc("SGD momentum (default 0)"), cl::value_desc("x"), cl::init(0), cl::cat(Cat));
static cl::opt<double> WeightDecay("weight-decay", cl::desc("Weight decay (default: sgd 0, adamw 0.01, torch's)"),
    cl::value_desc("x"), cl::init(-1), cl::cat(Cat));
static cl::opt<double> Beta1("beta1", cl::desc("AdamW beta1 (default 0.9)"), cl::value_desc("x"), cl::init(0.9), cl::cat(Cat));
static cl::opt<double> Beta2("beta2", cl::desc("AdamW beta2 (default 0.999)"), cl::value_desc("x"), cl::init(0.999), cl::cat(Cat));
static cl::opt<double> Eps("eps", cl::desc("AdamW epsilon (default 1e-8)"), cl::value_desc("x"), cl::init(1e-8), cl::cat(Cat));
static cl::opt<std::string> Schedule("schedule", cl::desc("The pipeline schedule: gpipe, 1f1b or merak (Merak's shifted critical path); default: the one the simulator predicts fastest (docs/pipeline.md)"),
    cl::value_desc("gpipe|1f1b|merak"), cl::init(""), cl::cat(Cat));
static cl::opt<std::string> Recompute("recompute", cl::desc("-train: recompute each micro-batch's forward before its backward: none, all, or auto (Merak's stage-aware recomputation: per stage, the share of its modules that keep their activations, by the paper's formula, within its memory)"),
    cl::value_desc("none|all|auto"), cl::init("none"), cl::cat(Cat));
static cl::opt<bool> Slice("slice", cl::desc("With a pipeline: AutoPipe's micro-batch slicer: run each micro-batch as two halves and send the first micro-batches' forward halves on their own, to shorten the start-up (the count is solved; docs/pipeline.md)"),
    cl::init(false), cl::cat(Cat));
static cl::opt<bool> Subpipeline("subpipeline", cl::desc("With tensor parallelism: Merak's sub-pipelined TMP: run each micro-batch as two halves that take turns at every TP all-reduce, one half's all-reduce in flight while the other half computes (docs/pipeline.md)"),
    cl::init(false), cl::cat(Cat));
static cl::opt<std::string> Half("half", cl::desc("f16/bf16 models (legalize-half computes them in f32): f32 keeps the f32 value between two nodes that compute in f32, as onnxruntime does (default); exact rounds every node's result to its half tensor, the ONNX result bit for bit (docs/ops.md)"),
    cl::value_desc("f32|exact"), cl::init("f32"), cl::cat(Cat));
static cl::opt<std::string> Search("search", cl::desc("How mesh-map searches: auto (exhaustive up to 100000 candidates, else annealing), exhaustive, anneal"),
    cl::value_desc("auto|exhaustive|anneal"), cl::init("auto"), cl::cat(Cat));
static cl::opt<int> AnnealSteps("anneal-steps", cl::desc("Simulated annealing steps (default 500, as AMP)"),
    cl::value_desc("N"), cl::init(0), cl::cat(Cat));
static cl::opt<unsigned> Seed("seed", cl::desc("Seed of the annealing's random choices (default 1)"),
    cl::value_desc("N"), cl::init(1), cl::cat(Cat));
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
	o->search = Search.c_str();
	o->train = Train;
	o->loss = Loss.c_str();
	o->optimizer = Optimizer.c_str();
	o->lr = LR;
	o->momentum = Momentum;
	o->weight_decay = WeightDecay;
	o->beta1 = Beta1;
	o->beta2 = Beta2;
	o->eps = Eps;
	o->schedule = Schedule.c_str();
	o->recompute = Recompute.c_str();
	o->half = Half.c_str();
	o->slice = Slice;
	o->subpipeline = Subpipeline;
	o->anneal_steps = AnnealSteps;
	o->seed = Seed;
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
	const struct {
		const cl::Option &opt;
		unsigned bit;
	} given[] = {{Batch, CL_GIVEN_BATCH}, {MaxModelSize, CL_GIVEN_MAX_MODEL_SIZE},
		{DP, CL_GIVEN_DP}, {TP, CL_GIVEN_TP}, {PP, CL_GIVEN_PP},
		{Microbatches, CL_GIVEN_MICROBATCHES}, {AnnealSteps, CL_GIVEN_ANNEAL_STEPS},
		{WeightDecay, CL_GIVEN_WEIGHT_DECAY}, {MeshOpt, CL_GIVEN_MESH}};
	o->given = 0;
	for (const auto &g : given)
		if (g.opt.getNumOccurrences() > 0)
			o->given |= g.bit;
	return true;
}
