/* sim.c - `fsdpshim sim`: runs a program on the simulated device and says
 * how much device memory each of its processes used at its peak.
 *
 * The program (a torchrun job included: its workers inherit the
 * environment) runs with the sim's libraries preloaded, so they win over
 * the ones it was built or packaged with (PyTorch's wheels reach NVIDIA's by
 * DT_RPATH, which LD_LIBRARY_PATH cannot override), and under the shim
 * unless --native. Every process that uses the sim writes its figures at
 * exit into a directory of this run's own (FSDPSHIM_SIM_REPORT,
 * sim/core/stats.c); once the program has exited the launcher reads them and
 * prints one line per process and device, the job's peak, and the devices
 * that refused memory, and, when the run was traced, the trace files its
 * processes wrote (the list `fsdpshim record` uses, run.c). So unlike
 * `run`, which becomes the program, this command forks, waits, and exits
 * with the program's status. */
#include "cli.h"

#include "size_parse.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_DEVICES 64

/* The sim's libraries, each preloaded when built; the runtime is required.
 * libnvidia-ml.so.1 is only ever dlopened by name (PyTorch, pynvml), which
 * finds a loaded library by its soname first: preloading it is what makes
 * the sim's win over a real one on a search path of the program's (its
 * DT_RPATH comes before LD_LIBRARY_PATH). libcupti.so.13 likewise: PyTorch
 * links the wheel's, whose CUPTI cannot work without NVIDIA's driver, and a
 * trace-only attach (CUDA_INJECTION64_PATH, fsdpshim attach) uses the CUPTI
 * that is loaded. */
static const char *const sim_libraries[] = {
    "libcudart.so.13",   "libcuda.so.1",  "libnccl.so.2",      "libcublas.so.13",
    "libcublasLt.so.13", "libcudnn.so.9", "libnvidia-ml.so.1", "libcupti.so.13"};
#define SIM_LIBRARY_COUNT (sizeof sim_libraries / sizeof sim_libraries[0])

void usage_sim(FILE *out)
{
    fprintf(out, "usage: fsdpshim sim [--devices N] [--mem SIZE] [--no-data] [--native]\n"
                 "                    [--conf CONF] [--lib PATH] [--] CMD [ARGS...]\n"
                 "\n"
                 "Runs CMD (a torchrun job included) on the simulated device, under the shim\n"
                 "unless --native, and prints on stderr the peak device memory of each process\n"
                 "and device, the job's peak, and the devices that refused an allocation.\n"
                 "  --devices N   simulated devices, 0..64 [FSDPSHIM_SIM_DEVICES, else 8]\n"
                 "  --mem SIZE    capacity of each device: bytes, or 512M, 80G, 80GiB, 1T\n"
                 "                [FSDPSHIM_SIM_MEM, else 16G]\n"
                 "  --no-data     a dry run: copies, sets and collectives move no bytes and\n"
                 "                device memory is never touched, so a job larger than this\n"
                 "                machine's memory runs (FSDPSHIM_SIM_DATA=0)\n"
                 "  --native      without the shim: the program's own allocator\n"
                 "  --conf CONF   FSDPSHIM_CONF for the shim, as for `fsdpshim run`\n"
                 "  --lib PATH    the libfsdpshim.so to preload, as for `fsdpshim run`\n"
                 "  -h, --help    this text\n"
                 "\n"
                 "The sim's libraries are taken from FSDPSHIM_SIM_DIR, else from the ones\n"
                 "installed with this program. Under the shim a Python command is routed as\n"
                 "by `fsdpshim run`. A process's rank is its RANK variable (torchrun sets it).\n"
                 "With tracing on (--conf trace:events, trace:stacks or trace:python, or the\n"
                 "same in FSDPSHIM_CONF) each process writes a trace, named by FSDPSHIM_TRACE\n"
                 "[fsdpshim-%%h-%%p.fst, %%r the rank], and the files written are named at the\n"
                 "end, as `fsdpshim record` names them.\n"
                 "\n"
                 "examples:\n"
                 "  fsdpshim sim -- ./my_cuda_program\n"
                 "  fsdpshim sim --devices 8 --mem 80G --no-data -- \\\n"
                 "      torchrun --nproc-per-node 8 train.py\n"
                 "  FSDPSHIM_TRACE='rank%%r.fst' fsdpshim sim --conf trace:python -- \\\n"
                 "      torchrun --nproc-per-node 2 train.py\n"
                 "\n"
                 "Exit status: that of CMD (128+N when killed by signal N); 1 a library is not\n"
                 "found; 2 usage error; 126 CMD cannot be run; 127 CMD not found.\n");
}

typedef struct sim_options {
    const char *devices, *mem, *conf, *lib;
    bool no_data, native;
    int first; /* argv index of CMD */
} sim_options;

/* -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, sim_options *o)
{
    const fs_option opts[] = {
        {"--devices", NULL, &o->devices, NULL}, {"--mem", NULL, &o->mem, NULL},
        {"--conf", NULL, &o->conf, NULL},       {"--lib", NULL, &o->lib, NULL},
        {"--no-data", NULL, NULL, &o->no_data}, {"--native", NULL, NULL, &o->native},
    };
    int rc = fs_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0], usage_sim, &o->first);

    if (rc >= 0) return rc;
    if (o->devices && (strspn(o->devices, "0123456789") != strlen(o->devices) || !*o->devices ||
                       strlen(o->devices) > 2 || atoi(o->devices) > MAX_DEVICES)) {
        fprintf(stderr, "fsdpshim sim: --devices takes a number from 0 to %d, not '%s'\n",
                MAX_DEVICES, o->devices);
        return FS_EXIT_USAGE;
    }
    if (o->mem && !sim_parse_size(o->mem)) {
        fprintf(stderr, "fsdpshim sim: --mem takes a size such as 80G or 512MiB, not '%s'\n",
                o->mem);
        return FS_EXIT_USAGE;
    }
    return -1;
}

/* FSDPSHIM_SIM_DIR, else the sim installed with this binary (FS_BIN_TO_SIM
 * from the install layout; ../lib/sim in the build tree). */
static bool find_sim_dir(char *out)
{
    const char *env = getenv("FSDPSHIM_SIM_DIR");
    char candidate[PATH_MAX * 2];

    if (env && *env) {
        snprintf(candidate, sizeof candidate, "%s/libcudart.so.13", env);
        if (access(candidate, R_OK) == 0 && realpath(env, out)) return true;
        fprintf(stderr, "fsdpshim sim: FSDPSHIM_SIM_DIR=%s has no libcudart.so.13\n", env);
        return false;
    }
    if (fs_cli_installed(FS_BIN_TO_SIM, "../lib/sim", "libcudart.so.13", candidate,
                         sizeof candidate) &&
        realpath(dirname(candidate), out))
        return true;
    fprintf(stderr,
            "fsdpshim sim: cannot find the simulated device's libraries installed with this "
            "program (%s from its directory); set FSDPSHIM_SIM_DIR\n",
            FS_BIN_TO_SIM);
    return false;
}

/* LD_PRELOAD gets the sim's libraries in front of the user's (and behind
 * the shim, which fs_shim_environment puts first afterwards), and
 * LD_LIBRARY_PATH the sim's directory, for programs that dlopen a library
 * the sim provides by a name not preloaded (libcudart.so, libnccl.so). */
static int sim_environment(const char *dir, const sim_options *o)
{
    char list[(PATH_MAX + 33) * SIM_LIBRARY_COUNT] = "", path[PATH_MAX + 32];
    size_t used = 0;

    for (size_t i = 0; i < SIM_LIBRARY_COUNT; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sim_libraries[i]);
        if (access(path, R_OK) != 0) continue;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ":" : "", path);
    }
    if (strpbrk(dir, ": ")) {
        fprintf(stderr, "fsdpshim sim: %s: LD_PRELOAD cannot hold a path with ':' or ' '\n", dir);
        return FS_EXIT_BAD_INPUT;
    }
    if (fs_cli_prepend("sim", "LD_PRELOAD", list) ||
        fs_cli_prepend("sim", "LD_LIBRARY_PATH", dir) ||
        (o->devices && fs_cli_setenv("sim", "FSDPSHIM_SIM_DEVICES", o->devices)) ||
        (o->mem && fs_cli_setenv("sim", "FSDPSHIM_SIM_MEM", o->mem)) ||
        (o->no_data && fs_cli_setenv("sim", "FSDPSHIM_SIM_DATA", "0")))
        return FS_EXIT_BAD_INPUT;
    return 0;
}

/* One device of one process, as its report file says. */
typedef struct device_use {
    int pid, device;
    char rank[16];
    unsigned long long peak, allocs, frees, refused, largest_refused;
} device_use;

typedef struct job_report {
    device_use *rows;
    size_t n, cap;
    unsigned long long capacity;
    int processes, moves_data;
} job_report;

static int add_row(job_report *r, const device_use *u)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        device_use *rows = realloc(r->rows, cap * sizeof *rows);
        if (!rows) return -1;
        r->rows = rows;
        r->cap = cap;
    }
    r->rows[r->n++] = *u;
    return 0;
}

/* Reads one process's report (sim/core/stats.c writes the format). */
static int read_one(const char *path, job_report *r)
{
    FILE *f = fopen(path, "r");
    char line[512], rank[16] = "-";
    int pid = -1, version = 0, moves_data = 1;
    unsigned long long capacity = 0;
    size_t rows_before = r->n;
    device_use u;

    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "fsdpshim-sim-report %d", &version) == 1 ||
            sscanf(line, "pid %d", &pid) == 1 || sscanf(line, "rank %15s", rank) == 1 ||
            sscanf(line, "capacity %llu", &capacity) == 1 ||
            sscanf(line, "moves_data %d", &moves_data) == 1)
            continue;
        memset(&u, 0, sizeof u);
        if (sscanf(line,
                   "device %d peak_used_bytes %llu device_allocs %llu device_frees %llu "
                   "refused %llu largest_refused %llu",
                   &u.device, &u.peak, &u.allocs, &u.frees, &u.refused, &u.largest_refused) != 6)
            continue;
        u.pid = pid;
        snprintf(u.rank, sizeof u.rank, "%s", rank);
        if (add_row(r, &u)) break;
    }
    fclose(f);
    if (version != 1) return -1;
    /* a process that loaded the sim but used no device (torchrun's agent) */
    if (r->n == rows_before) return 0;
    r->processes++;
    r->capacity = capacity;
    r->moves_data = moves_data;
    return 0;
}

/* Reads every report in dir and removes the directory. */
static void read_reports(const char *dir, job_report *r)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX + 300];

    if (!d) return;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!strncmp(e->d_name, "sim-", 4) && !strchr(e->d_name, '.') && read_one(path, r))
            fprintf(stderr, "fsdpshim sim: unreadable report %s\n", e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int by_rank_then_pid(const void *a, const void *b)
{
    const device_use *x = a, *y = b;
    long rx = strcmp(x->rank, "-") ? atol(x->rank) : LONG_MAX;
    long ry = strcmp(y->rank, "-") ? atol(y->rank) : LONG_MAX;

    if (rx != ry) return rx < ry ? -1 : 1;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    return x->device - y->device;
}

static const char *human(unsigned long long bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;

    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

static void print_report(job_report *r, bool native)
{
    const device_use *top = NULL;
    char a[32], b[32];

    if (!r->processes) {
        fprintf(stderr, "fsdpshim sim: no process used the simulated device\n");
        return;
    }
    qsort(r->rows, r->n, sizeof *r->rows, by_rank_then_pid);
    fprintf(stderr, "fsdpshim sim: %d process%s on devices of %s, %s%s\n", r->processes,
            r->processes == 1 ? "" : "es", human(r->capacity, a, sizeof a),
            native ? "without the shim" : "under the shim",
            r->moves_data ? "" : ", dry run (no data moved)");
    fprintf(stderr, "fsdpshim sim: %-6s %-8s %-6s %12s %16s %8s %8s %8s\n", "rank", "pid", "device",
            "peak", "peak_bytes", "allocs", "frees", "refused");
    for (size_t i = 0; i < r->n; i++) {
        const device_use *u = &r->rows[i];
        fprintf(stderr, "fsdpshim sim: %-6s %-8d %-6d %12s %16llu %8llu %8llu %8llu\n", u->rank,
                u->pid, u->device, human(u->peak, a, sizeof a), u->peak, u->allocs, u->frees,
                u->refused);
        if (!top || u->peak > top->peak) top = u;
    }
    if (top)
        fprintf(stderr,
                "fsdpshim sim: peak %s (%llu bytes) on device %d, rank %s (pid %d): %.1f%% of "
                "the device\n",
                human(top->peak, a, sizeof a), top->peak, top->device, top->rank, top->pid,
                r->capacity ? 100.0 * (double)top->peak / (double)r->capacity : 0.0);
    for (size_t i = 0; i < r->n; i++) {
        const device_use *u = &r->rows[i];
        if (u->refused)
            fprintf(stderr,
                    "fsdpshim sim: out of memory: device %d of rank %s (pid %d) refused %llu "
                    "allocation%s, the largest %s; the program's own error says which of its "
                    "allocations failed\n",
                    u->device, u->rank, u->pid, u->refused, u->refused == 1 ? "" : "s",
                    human(u->largest_refused, b, sizeof b));
    }
}

int command_sim(int argc, char **argv)
{
    sim_options o = {0};
    char dir[PATH_MAX], reports[PATH_MAX], list[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    job_report r = {0};
    pid_t pid;
    int rc = parse_options(argc, argv, &o);

    if (rc >= 0) return rc;
    if (!find_sim_dir(dir)) return FS_EXIT_BAD_INPUT;
    if ((rc = sim_environment(dir, &o))) return rc;
    if (!o.native && (rc = fs_shim_environment("sim", o.lib, o.conf, argv + o.first))) return rc;
    /* traced: the processes name their files in a list, as under `fsdpshim
     * record`, unless a launcher around this one keeps the list already */
    const char *outer = getenv("FSDPSHIM_TRACE_LIST");
    bool traced = !o.native && fs_conf_traces(getenv("FSDPSHIM_CONF")) && !(outer && *outer);
    if (traced && (rc = fs_trace_list_begin("sim", list, sizeof list))) return rc;
    snprintf(reports, sizeof reports, "%s/fsdpshim-sim-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(reports)) {
        fprintf(stderr, "fsdpshim sim: cannot make a directory for the reports: %s\n",
                strerror(errno));
        rc = FS_EXIT_BAD_INPUT;
        goto out;
    }
    if (fs_cli_setenv("sim", "FSDPSHIM_SIM_REPORT", reports)) {
        rmdir(reports);
        rc = FS_EXIT_BAD_INPUT;
        goto out;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fsdpshim sim: cannot start the program: %s\n", strerror(errno));
        rmdir(reports);
        rc = FS_EXIT_CANNOT_RUN;
        goto out;
    }
    if (pid == 0) _exit(fs_exec_program("sim", argv + o.first));
    rc = fs_wait_program(pid);
    read_reports(reports, &r);
    print_report(&r, o.native);
    free(r.rows);
    if (traced) fs_trace_list_name(list, "sim");
    return rc;
out:
    if (traced) unlink(list);
    return rc;
}
