/* report_page.c - what both halves of `report --html`'s page
 * (report_html.c, the frame and tables; report_svg.c, the charts) write the
 * same way: every string of a trace escaped (fs_html_esc), the names of
 * ranks and streams, and the page's memory (the analyzer cannot go on
 * without it). Declared in report_html.h. */
#include "report_html.h"

#include "render.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void *fs_html_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) fs_analysis_oom("report");
    return p;
}

void fs_html_esc(FILE *f, const char *s, size_t max)
{
    size_t n = strlen(s), chars = 0;
    for (size_t i = 0; i < n; chars++) {
        unsigned char c = (unsigned char)s[i];
        size_t k = fs_utf8_len((const unsigned char *)s + i, n - i);
        if (max && chars + 1 == max && i + (k ? k : 1) < n) {
            fputs("\xe2\x80\xa6", f); /* … */
            return;
        }
        if (!k || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
            fputs("&#xFFFD;", f);
        else if (c == '&')
            fputs("&amp;", f);
        else if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '"')
            fputs("&quot;", f);
        else if (c == '\'')
            fputs("&#39;", f);
        else
            fwrite(s + i, 1, k, f);
        i += k ? k : 1;
    }
}

void fs_html_trace_name(const fs_html_trace *p, char *buf, size_t len)
{
    if (p->rank >= 0)
        snprintf(buf, len, "rank %d", p->rank);
    else
        snprintf(buf, len, "pid %u", p->header.pid);
}

void fs_html_stream_name(uint64_t stream, char *buf, size_t len)
{
    if (stream == 0)
        snprintf(buf, len, "default stream");
    else if ((stream & 1) && stream < 0x10000) /* docs/trace-format.md */
        snprintf(buf, len, "per-thread default stream 0x%" PRIx64, stream);
    else
        snprintf(buf, len, "stream 0x%" PRIx64, stream);
}
