// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's page (report.h). The data go in one
 * <script type="application/json"> element, which the browser never runs or
 * parses as markup; only "</script" could end it early, so every '<' of the
 * JSON (it can only be inside a string) is written as \u003c, which JSON
 * reads back as the same character. Text outside it that comes from the
 * target (the title's comm) is escaped as HTML (report_html_text).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "assets.h"
#include "report.h"
#include "../pprof.h"
#include "../snapshot_doc.h"
#include "../../util/text.h"

void report_html_text(FILE *out, const char *s)
{
	const unsigned char *c = (const unsigned char *)s;
	size_t n = strlen(s);

	while (n) {
		size_t k = text_utf8_len(c, n);
		if (!k || (*c < ' ' && *c != '\t' && *c != '\n') || *c == 0x7f ||
		    (k == 2 && c[0] == 0xc2 && c[1] < 0xa0)) {
			fputs("\xef\xbf\xbd", out); /* U+FFFD */
			k = k ? k : 1;
		} else if (*c == '&') {
			fputs("&amp;", out);
		} else if (*c == '<') {
			fputs("&lt;", out);
		} else if (*c == '>') {
			fputs("&gt;", out);
		} else if (*c == '"') {
			fputs("&quot;", out);
		} else if (*c == '\'') {
			fputs("&#39;", out);
		} else {
			fwrite(c, 1, k, out);
		}
		c += k;
		n -= k;
	}
}

/* A folded profile as one JSON string ("" when there is none). */
static int write_folded(struct json_writer *w, const char *key, const struct prof *p,
			enum folded_value value)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int err = 0;

	if (!mem)
		return -errno;
	if (p)
		err = folded_write(mem, p, value, NULL);
	if (fclose(mem) && !err)
		err = -ENOMEM;
	json_key(w, key);
	json_string_n(w, err ? "" : buf, err ? 0 : len);
	free(buf);
	return err;
}

/* The page's data as one JSON document in memory: 0 or -errno. */
static int report_data(char **buf, size_t *len, const struct figures *f, const struct prof *sites,
		       const struct series *s)
{
	struct json_writer w;
	FILE *mem = open_memstream(buf, len);
	int err;

	if (!mem)
		return -errno;
	json_init(&w, mem, false);
	json_begin_object(&w);
	json_kv_u64(&w, "version", 1);
	json_key(&w, "snapshot");
	snapshot_write(&w, f, sites);
	json_key(&w, "series");
	series_write(&w, s);
	json_key(&w, "folded");
	json_begin_object(&w);
	json_kv_u64(&w, "rate", sites ? sites->period : 0);
	err = write_folded(&w, "inuse", sites, FOLDED_INUSE);
	if (!err)
		err = write_folded(&w, "alloc", sites, FOLDED_ALLOC);
	if (!err)
		err = write_folded(&w, "peak", sites, FOLDED_PEAK);
	json_end_object(&w);
	json_end_object(&w);
	if (!err)
		err = json_finish(&w);
	if (fclose(mem) && !err)
		err = -ENOMEM;
	if (err) {
		free(*buf);
		*buf = NULL;
	}
	return err;
}

static void write_json_script(FILE *out, const char *json, size_t len)
{
	fputs("<script type=\"application/json\" id=\"tally-data\">", out);
	for (size_t i = 0; i < len; i++) {
		if (json[i] == '<')
			fputs("\\u003c", out);
		else
			fputc(json[i], out);
	}
	fputs("</script>\n", out);
}

static void write_head(FILE *out, const struct figures_process *root)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      /* nothing may be fetched: the policy says so to the browser too */
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
	      "<title>tally report: ",
	      out);
	report_html_text(out, root->target.comm ? root->target.comm : "?");
	fprintf(out, " (%d)</title>\n<style>\n%s\n%s</style>\n</head>\n", (int)root->target.pid,
		report_uplot_css, report_page_css);
}

static void write_body(FILE *out, const struct figures_process *root, const char *json, size_t len)
{
	fputs("<body>\n<header><h1>tally report: <span id=\"comm\">", out);
	report_html_text(out, root->target.comm ? root->target.comm : "?");
	fprintf(out, "</span> <span class=\"pid\">pid %d</span></h1>\n", (int)root->target.pid);
	if (root->target.cmdline && *root->target.cmdline) {
		fputs("<p class=\"cmdline\"><code>", out);
		report_html_text(out, root->target.cmdline);
		fputs("</code></p>\n", out);
	}
	fputs("</header>\n<main id=\"report\"><noscript>This page draws its charts with "
	      "JavaScript; its data are in the element tally-data.</noscript></main>\n",
	      out);
	write_json_script(out, json, len);
	/* MIT's notice goes with each copy of uPlot (it has no "--") */
	fprintf(out,
		"<!-- uPlot 1.6.32, https://github.com/leeoniya/uPlot:\n%s-->\n"
		"<script>\n%s\n</script>\n<script>\n%s\n</script>\n</body>\n</html>\n",
		report_uplot_license, report_uplot_js, report_page_js);
}

int report_write(FILE *out, const struct figures *f, const struct prof *sites,
		 const struct series *s)
{
	char *json = NULL, *page = NULL;
	size_t len = 0, plen = 0;
	FILE *mem;
	int err = report_data(&json, &len, f, sites, s);

	if (err)
		return err;
	mem = open_memstream(&page, &plen);
	if (!mem) {
		err = -errno;
		goto out_json;
	}
	write_head(mem, &f->procs[0]);
	write_body(mem, &f->procs[0], json, len);
	if (fclose(mem)) {
		err = -ENOMEM;
		goto out_page;
	}
	errno = 0;
	if (fwrite(page, 1, plen, out) != plen || fflush(out))
		err = errno ? -errno : -EIO;
out_page:
	free(page);
out_json:
	free(json);
	return err;
}
