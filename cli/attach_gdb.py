# attach_gdb.py - what gdb runs in `fsdpshim attach` and `fsdpshim detach`
# (cli/attach.c, which puts the settings PID, LIB, MODE, FN, TYPE,
# CALL_ARGS, NOTE_FN and WAIT_S ahead of this file and embeds the whole in the
# command): stop the process where a call into it is safe, then dlopen(LIB,
# MODE) there and call FN, of C type TYPE, with CALL_ARGS. It prints
# FSDPSHIM_RESULT N: FN's value, -1 no library, -2 no FN, -3 no safe place
# found; then, when FN answered 0 and NOTE_FN is set, FSDPSHIM_NOTE and the
# string that NOTE_FN (const char *(void), looked up in LIB) returns, where LIB
# has it.
#
# gdb calls on the thread it stopped, and dlopen and gdb's own copies of the
# strings take the C library's allocator and loader locks: a thread stopped
# inside malloc, or inside the loader, would wait for itself for ever. So
# the call is made on a thread at the entry of a CUDA runtime call the
# program makes (it holds none of those locks there), or, in a process that
# makes none for a while, on a thread whose stack shows none of the
# functions that take them.
import os
import signal
import threading

import gdb

# Runtime entry points a CUDA program calls all the time, from its own code:
# at their first instruction the thread holds none of the C library's or the
# runtime's locks (the driver's entry points are left out: the runtime calls
# them holding its own).
ENTRIES = ("cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaMemcpyAsync",
           "cudaMemcpyAsync_ptsz", "cudaMemsetAsync", "cudaMemsetAsync_ptsz",
           "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaMallocAsync_ptsz",
           "cudaFreeAsync", "cudaFreeAsync_ptsz", "cudaStreamSynchronize",
           "cudaStreamSynchronize_ptsz", "cudaEventRecord", "cudaEventRecord_ptsz",
           "cudaEventQuery", "cudaStreamQuery", "cudaStreamWaitEvent",
           "cudaDeviceSynchronize", "cudaGetDevice", "cudaSetDevice", "cudaMemcpy",
           "cudaMemset")
# A thread whose stack has one of these is not safe to call on: it may hold
# the allocator's or the loader's lock, which the call (dlopen, malloc)
# takes again.
UNSAFE = ("malloc", "free", "calloc", "realloc", "memalign", "aligned_alloc", "valloc",
          "dlopen", "dlclose", "dlsym", "dlvsym", "dladdr", "dl_iterate_phdr", "_dl_",
          "fork", "pthread_create", "pthread_exit", "_IO_", "exit")
# Signals that others send the process (a launcher's SIGTERM, a terminal's
# SIGHUP or SIGTSTP, a user's SIGUSR1, the real-time signals of MPI and
# profilers): gdb would stop for each of them and, when it came to a thread
# other than the one a call is being made on, abandon the call there. That
# thread then goes on with the call once gdb has gone, and returns from it
# into gdb's dummy frame at the program's entry point: SIGSEGV, or worse;
# and the signal itself was at best passed on at the detach (seen: SIGTERM
# during `fsdpshim detach` killed the program with SIGSEGV). They are passed
# on at once instead, as if gdb were not there. Faults (SIGSEGV, SIGBUS,
# SIGFPE, SIGILL, SIGABRT) still stop: one raised by the call itself is
# unwound (unwindonsignal), not passed to the program.
PASSED = ("SIGHUP SIGQUIT SIGTERM SIGPIPE SIGUSR1 SIGUSR2 SIGTSTP SIGCONT SIGTTIN SIGTTOU "
          "SIGXCPU SIGXFSZ SIGPWR " + " ".join("SIG%d" % n for n in range(34, 65)))
# WAIT_S (a setting): seconds for a breakpoint, before the threads' stacks are looked at
RETRIES = 50  # of those looks, 20 ms of running apart

def result(n):
    print("FSDPSHIM_RESULT %d" % n)

# The strings passed in the call, in the process's memory: gdb's own copies
# of string literals are malloc'ed there and never freed.
strings = []

def c_string(s):
    """s copied into the process (freed by free_strings), as an expression."""
    data = s.encode() + b"\0"
    p = int(gdb.parse_and_eval("((void *(*)(unsigned long))malloc)(%d)" % len(data)))
    if p == 0:
        raise gdb.GdbError("malloc failed in the process")
    strings.append(p)
    gdb.selected_inferior().write_memory(p, data)
    return "(const char *)%d" % p

def free_strings():
    for p in strings:
        gdb.parse_and_eval("((void (*)(void *))free)(%d)" % p)

def run_for(seconds):
    """Lets the process run until it stops at a breakpoint, or for `seconds`
    (then it is stopped with a SIGINT that gdb keeps from it). Whether a
    breakpoint stopped it."""
    lock = threading.Lock()
    state = {"stopped": False, "sent": False}
    def interrupt():
        with lock:
            if not state["stopped"]:
                os.kill(PID, signal.SIGINT)
                state["sent"] = True
    stops = []
    handler = lambda event: stops.append(event)
    gdb.events.stop.connect(handler)
    timer = threading.Timer(seconds, interrupt)
    timer.start()
    try:
        gdb.execute("continue", to_string=True)
    finally:
        with lock:
            state["stopped"] = True
        timer.cancel()
        gdb.events.stop.disconnect(handler)
    hit = any(isinstance(e, gdb.BreakpointEvent) for e in stops)
    if hit and state["sent"]:
        # the SIGINT was sent as the breakpoint stopped it: let it arrive now
        # rather than inside the call (then this stop is lost)
        gdb.execute("continue", to_string=True)
        return False
    return hit

def safe(thread):
    thread.switch()
    frame = gdb.newest_frame()
    while frame is not None:
        name = frame.name() or ""
        lib = gdb.solib_name(frame.pc()) or ""
        if "/ld-linux" in lib or "/ld-" in lib or any(w in name for w in UNSAFE):
            return False
        frame = frame.older()
    return True

def stop_safely():
    """Stops the process with a thread selected that may be called on."""
    breakpoints = []
    for name in ENTRIES:
        try:
            breakpoints.append(gdb.Breakpoint(name, internal=True))
        except gdb.error:
            pass  # not in this process
    try:
        if breakpoints and run_for(WAIT_S):
            return True
    finally:
        for b in breakpoints:
            b.delete()
    for attempt in range(RETRIES):
        for thread in gdb.selected_inferior().threads():
            if thread.is_valid() and safe(thread):
                return True
        run_for(0.02)
    return False

def call():
    h = gdb.parse_and_eval("((void *(*)(const char *, int))dlopen)(%s, %d)" % (c_string(LIB), MODE))
    if int(h) == 0:
        return -1
    gdb.set_convenience_variable("h", h)
    f = gdb.parse_and_eval("((void *(*)(void *, const char *))dlsym)($h, %s)" % c_string(FN))
    if int(f) == 0:
        return -2
    gdb.set_convenience_variable("f", f)
    args = ", ".join(c_string(a) if isinstance(a, str) else str(a) for a in CALL_ARGS)
    return int(gdb.parse_and_eval("((%s)$f)(%s)" % (TYPE, args)))

def note():
    """NOTE_FN's string, or None (no NOTE_FN, or a LIB without it)."""
    if not NOTE_FN:
        return None
    g = gdb.parse_and_eval("((void *(*)(void *, const char *))dlsym)($h, %s)" % c_string(NOTE_FN))
    if int(g) == 0:
        return None
    gdb.set_convenience_variable("g", g)
    text = gdb.parse_and_eval("((const char *(*)(void))$g)()")
    return text.string() if int(text) else None

gdb.execute("set breakpoint pending off")
gdb.execute("set unwindonsignal on")
gdb.execute("handle %s nostop noprint pass" % PASSED, to_string=True)
if not stop_safely():
    result(-3)
else:
    # run_for's own SIGINT is never sent after it returns: from now on a
    # SIGINT is someone else's, for the program, like the signals above
    gdb.execute("handle SIGINT nostop noprint pass", to_string=True)
    try:
        r = call()
        result(r)
        if r == 0:
            text = note()
            if text:
                print("FSDPSHIM_NOTE " + " ".join(text.split()))
    finally:
        free_strings()
