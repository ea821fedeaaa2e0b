/* next_b.c - the second definition of fs_next_probe, in version node
 * FSDPSHIM_NEXT_1 (next_b.map); rtld_next.c. */
__attribute__((visibility("default"))) int fs_next_probe(void)
{
    return 'b';
}

/* Only here, so that the program needs this library. */
__attribute__((visibility("default"))) int fs_next_b_loaded(void)
{
    return 1;
}
