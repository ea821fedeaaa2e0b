/* signals.c - writing what is buffered when the process dies of a signal:
 * abort, the fatal faults and SIGTERM (a launcher's way to stop a job).
 *
 * The handler writes without waiting on any lock (writer.c's in-signal
 * cycle), then hands the signal on: to the handler the program had
 * installed before, or, where there was none, to the default action by
 * restoring it and raising again. SIGKILL cannot be caught: what the writer
 * thread had not yet written (at most one flush interval) is lost. */
#include "trace_internal.h"

#include <string.h>

static const int fatal[] = {SIGTERM, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction previous[NSIG];

static void on_fatal(int sig, siginfo_t *info, void *uc)
{
    struct sigaction *old = &previous[sig];

    fs_trace_write_cycle(true);
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) {
            old->sa_sigaction(sig, info, uc);
            return;
        }
    } else if (old->sa_handler == SIG_IGN) {
        return;
    } else if (old->sa_handler != SIG_DFL) {
        old->sa_handler(sig);
        return;
    }
    /* The default action: restored, then raised again (a fault re-executes
     * its instruction on return and takes it the same way). */
    sigaction(sig, old, NULL);
    if (sig == SIGTERM || sig == SIGABRT) raise(sig);
}

void fs_trace_signals_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction old;
        if (sigaction(fatal[i], NULL, &old) != 0) continue;
        previous[fatal[i]] = old;
        sigaction(fatal[i], &sa, NULL);
    }
}
