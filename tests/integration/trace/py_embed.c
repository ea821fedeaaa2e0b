/* py_embed.c - a program that embeds Python (python3-dev), for the Python
 * frames test: it runs the script named on its command line, which
 * allocates device memory through ctypes with and without holding the GIL.
 * It knows nothing of the shim. */
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    FILE *f;
    int rc;

    if (argc < 2) {
        fprintf(stderr, "usage: py_embed SCRIPT\n");
        return 2;
    }
    f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    Py_Initialize();
    rc = PyRun_SimpleFileEx(f, argv[1], 1);
    if (Py_FinalizeEx() < 0) rc = 1;
    return rc ? 1 : 0;
}
