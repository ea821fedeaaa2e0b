/* rtld_next.c - dlsym(RTLD_NEXT, ...) keeps its meaning under the shim's
 * dlsym: the next definition after the caller's object, not after the
 * shim's. The program is linked with next_a and next_b, both defining
 * fs_next_probe, so the order is: the program, (the preloads,) next_a,
 * next_b, libc. From next_a, RTLD_NEXT must find next_b's (an answer made
 * relative to the shim, which comes before next_a, would be next_a's own:
 * the recursion that breaks interposers); from the program, next_a's.
 * malloc through RTLD_NEXT is the C library's, as a malloc interposer
 * expects. The program runs the same with and without the shim. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int fs_next_probe(void);
int fs_next_b_loaded(void);
void *fs_next_from_a(const char *name);
void *fs_next_versioned_from_a(const char *name, const char *version);

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef int (*probe_fn)(void);

int main(void)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    probe_fn p;

    alarm(30);
    EXPECT(fs_next_b_loaded() && libc);
    EXPECT(fs_next_probe() == 'a');
    p = (probe_fn)dlsym(RTLD_NEXT, "fs_next_probe");
    EXPECT(p && p() == 'a');
    p = (probe_fn)fs_next_from_a("fs_next_probe");
    EXPECT(p && p() == 'b');
    p = (probe_fn)fs_next_versioned_from_a("fs_next_probe", "FSDPSHIM_NEXT_1");
    EXPECT(p && p() == 'b');
    p = (probe_fn)dlsym(RTLD_DEFAULT, "fs_next_probe");
    EXPECT(p && p() == 'a');
    EXPECT(fs_next_from_a("malloc") == dlsym(libc, "malloc"));
    EXPECT(fs_next_from_a("fs_next_no_such_symbol") == NULL && dlerror() != NULL);
    printf("rtld_next: ok\n");
    return 0;
}
