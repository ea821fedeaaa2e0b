/* size_parse.c - the sim's size syntax ("16G", "512MiB", "1000"), shared
 * with `fsdpshim sim --mem`, which checks a size before the sim sees it. */
#include "size_parse.h"

#include <ctype.h>
#include <stdlib.h>

size_t sim_parse_size(const char *s)
{
    if (!s || !isdigit((unsigned char)*s)) return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        shift = 10;
        end++;
        break;
    case 'M':
        shift = 20;
        end++;
        break;
    case 'G':
        shift = 30;
        end++;
        break;
    case 'T':
        shift = 40;
        end++;
        break;
    default:
        break;
    }
    /* Accept "16G", "16GB", "16GiB". */
    if (shift && (*end == 'i' || *end == 'I')) end++;
    if (shift && (*end == 'b' || *end == 'B')) end++;
    if (*end != '\0' || (shift && v > (~0ull >> shift))) return 0;
    return (size_t)(v << shift);
}
