// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live screen of `tally top` (top_view.h). Every string drawn is ASCII:
 * the target's names were sanitized by top_rows.c, and no locale is set, so
 * that numbers print the same everywhere and columns align by bytes.
 */
#include <curses.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_sites.h"
#include "top_view.h"
#include "internal.h"

enum {
	PAIR_TERM = 1, /* 1..8: the identity's terms, in top_term_names order */
	PAIR_TITLE = PAIR_TERM + TOP_TERMS,
	PAIR_WARN,
	PAIR_TABLE,
	PAIR_KEY,
	PAIR_SORTED,
};

#define NAME_MIN 8
#define NAME_MAX_W 40
/* widths of the columns after NAME, each after a space: 73 columns, 77 with
 * ID's; 85 columns leave the name its 8 (on 80, YIELDS is cut at the edge) */
static const int col_w[TOP_NCOLS] = { 0, 6, 6, 6, 7, 6, 7, 6, 6, 7, 6 };
#define FIXED_W 77
/* the sites view: IN USE, PEAK, OBJECTS, ALLOCATED, then GROUP, PID and STACK */
#define GROUP_MAX_W 20

static SCREEN *screen;
static bool color;
static int cursor = 1; /* the cursor's visibility before: restored on close */

/* A background per term, black letters on it, so that the bar reads in
 * color and, through the letters, without. */
static const short term_bg[TOP_TERMS] = {
	COLOR_GREEN,   COLOR_YELLOW, COLOR_CYAN, COLOR_BLUE,
	COLOR_MAGENTA, COLOR_BLACK,  COLOR_RED,	 COLOR_WHITE,
};

static attr_t pair_or(int pair, attr_t plain)
{
	return color ? (attr_t)COLOR_PAIR(pair) : plain;
}

int top_view_open(bool no_color)
{
	static bool registered;

	if (screen)
		return 0;
	/* newterm, not initscr: initscr exits the process on a bad $TERM */
	screen = newterm(NULL, stdout, stdin);
	if (!screen)
		return -ENOTTY;
	if (!registered && !atexit(top_view_close))
		registered = true;
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	cursor = curs_set(0);
	color = !no_color && has_colors();
	if (color) {
		start_color();
		/* the terminal's own background where it can keep it */
		short bg = use_default_colors() == OK ? -1 : COLOR_BLACK;
		for (int i = 0; i < TOP_TERMS; i++)
			init_pair((short)(PAIR_TERM + i),
				  term_bg[i] == COLOR_BLACK ? COLOR_WHITE : COLOR_BLACK,
				  term_bg[i]);
		init_pair(PAIR_TITLE, COLOR_CYAN, bg);
		init_pair(PAIR_WARN, COLOR_RED, bg);
		init_pair(PAIR_TABLE, COLOR_BLACK, COLOR_GREEN);
		init_pair(PAIR_KEY, COLOR_BLACK, COLOR_CYAN);
		init_pair(PAIR_SORTED, COLOR_BLACK, COLOR_CYAN);
	}
	return 0;
}

void top_view_close(void)
{
	if (!screen)
		return;
	curs_set(cursor == ERR ? 1 : cursor);
	endwin();
	delscreen(screen);
	screen = NULL;
}

/* printf at (y, x), cut at the right edge; returns the column after it. */
static int put(int y, int x, attr_t a, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int put(int y, int x, attr_t a, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	if (y < 0 || y >= LINES || x >= COLS)
		return x;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return x;
	if (n > (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 1;
	attrset(a);
	mvaddnstr(y, x, buf, COLS - x < n ? COLS - x : n);
	attrset(A_NORMAL);
	return x + n;
}

/* Counts and rates short: "999", "12.3K", "4.5M" (powers of 1000). */
static void fmt_count(char *buf, size_t size, double v)
{
	static const char units[] = " KMGTP";
	unsigned u = 0;

	while (v >= 999.95 && u < sizeof(units) - 2) {
		v /= 1000;
		u++;
	}
	if (!u)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size,
			 v < 9.995 ? "%.2f%c" :
			 v < 99.95 ? "%.1f%c" :
				     "%.0f%c",
			 v, units[u]);
}

static void fmt_uptime(char *buf, size_t size, double s)
{
	unsigned long t = (unsigned long)s;

	snprintf(buf, size, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
}

static void draw_header(const struct top_frame *f, const struct top_ui *ui)
{
	const struct top_header *h = &f->hdr;
	char up[32], ev[32], status[64], peak[64];
	attr_t warn = pair_or(PAIR_WARN, A_BOLD) | A_BOLD;
	int x;

	fmt_uptime(up, sizeof(up), h->uptime_s);
	top_fmt_peak(peak, sizeof(peak), h, false);
	x = put(0, 0, pair_or(PAIR_TITLE, A_BOLD) | A_BOLD, "tally top");
	x = put(0, x, A_NORMAL, "  %s (pid %d", h->comm, (int)h->pid);
	if (h->ns_pid != h->pid)
		x = put(0, x, A_NORMAL, ", %d in its namespace", (int)h->ns_pid);
	if (h->container[0])
		x = put(0, x, A_NORMAL, ", container %s", h->container);
	x = put(0, x, A_NORMAL, ", %s)  up %s  peak %s",
		h->injected ? "injected" :
		h->late	    ? "attached" :
			      "started",
		up, peak);
	if (h->gone && h->exit_code >= 0)
		snprintf(status, sizeof(status), "target %s (status %d)",
			 h->oom_kill ? "killed by the OOM killer" : "exited", h->exit_code);
	else if (h->gone)
		snprintf(status, sizeof(status), "target exited");
	else
		status[0] = 0;
	if (ui->paused)
		strcat(status, status[0] ? " - PAUSED" : "PAUSED");
	if (status[0]) {
		int sx = COLS - (int)strlen(status) - 1;
		put(0, sx > x + 2 ? sx : x + 2, warn, "%s", status);
	}
	if (h->events_s >= 0)
		fmt_count(ev, sizeof(ev), h->events_s);
	else
		snprintf(ev, sizeof(ev), "-");
	x = put(1, 0, A_NORMAL, "events %s/s  received %llu  lost ", ev,
		(unsigned long long)h->received);
	x = put(1, x, h->lost_msgs ? warn : A_NORMAL, "%llu", (unsigned long long)h->lost_msgs);
	x = put(1, x, A_NORMAL, "  figures ");
	x = put(1, x, h->exact ? A_NORMAL : warn, "%s", h->exact ? "exact" : "NOT exact");
	/* which process and why, as a code (README lists them): one line */
	if (!h->exact && h->why_code)
		x = put(1, x, warn, ": %s (pid %d %s%s)", h->why_code, (int)h->why_pid, h->why_comm,
			h->why_more || h->why_procs ? ", more" : "");
	put(1, x, A_NORMAL, "  processes %u (%u running)  view %s", h->procs, h->running,
	    top_mode_names[f->mode]);
}

/* The identity: totals, the bar, and a legend with each term's bytes.
 * Returns the first free line. */
static int draw_identity(const struct top_frame *f, int y)
{
	const struct top_identity *id = &f->id;
	char b[16];
	unsigned cells[TOP_TERMS];
	int x;

	if (f->hdr.alloc == FIGURES_ALLOC_NONE && f->hdr.foreign_alloc) {
		put(y, 0, A_NORMAL, "allocator: %s (not traced: its heap has no figures)",
		    f->hdr.foreign_alloc);
		return y + 2;
	}
	if (f->hdr.alloc == FIGURES_ALLOC_NONE) {
		put(y, 0, A_NORMAL, "allocator: none seen yet (no allocator figures)");
		return y + 2;
	}
	if (id->mapped_known) {
		top_fmt_bytes(b, sizeof(b), id->mapped);
		x = put(y, 0, A_NORMAL, "allocator tally  mapped %s  ", b);
		put(y, x, id->balanced ? A_NORMAL : pair_or(PAIR_WARN, A_BOLD) | A_BOLD, "%s",
		    id->balanced ? "balanced" : "NOT balanced (batches in flight)");
		y++;
		top_bar_cells(id, COLS > 2 ? (unsigned)COLS - 2 : 0, cells);
		x = put(y, 0, A_NORMAL, "[");
		for (unsigned i = 0; i < TOP_TERMS; i++) {
			attrset(pair_or(PAIR_TERM + (int)i, A_NORMAL));
			for (unsigned c = 0; c < cells[i] && x < COLS; c++)
				mvaddch(y, x++, (chtype)top_term_letters[i]);
			attrset(A_NORMAL);
		}
		put(y, x, A_NORMAL, "]");
	} else {
		put(y, 0, A_NORMAL,
		    "allocator glibc  mapped -  (glibc: only live and rounding "
		    "are known)");
		y++;
	}
	y++;
	x = 0;
	for (unsigned i = 0; i < TOP_TERMS; i++) {
		char item[64];
		int len;

		if (id->known[i])
			top_fmt_bytes(b, sizeof(b), id->term[i]);
		else
			snprintf(b, sizeof(b), "-");
		len = snprintf(item, sizeof(item), " %s %s  ", top_term_names[i], b);
		if (x && x + 1 + len > COLS) {
			y++;
			x = 0;
		}
		x = put(y, x, pair_or(PAIR_TERM + (int)i, A_REVERSE), "%c", top_term_letters[i]);
		x = put(y, x, A_NORMAL, "%s", item);
	}
	return y + 2;
}

/* The ID column: a group's id, or a process's pid. */
static int id_w(const struct top_frame *f)
{
	return f->mode == TOP_MODE_PROCS ? 7 : 3;
}

/* As wide as the longest name, within what the terminal leaves it. */
static int name_width(const struct top_frame *f)
{
	int w = NAME_MIN, room = COLS - FIXED_W - (id_w(f) - 3);

	for (unsigned i = 0; i < f->nrows; i++) {
		int len = (int)strlen(f->rows[i].name);
		if (len > w)
			w = len;
	}
	if (w > room)
		w = room;
	if (w > NAME_MAX_W)
		w = NAME_MAX_W;
	return w < NAME_MIN ? NAME_MIN : w;
}

static void draw_name(int y, int x, const char *name, int w)
{
	if ((int)strlen(name) <= w)
		put(y, x, A_NORMAL, "%-*s", w, name);
	else
		put(y, x, A_NORMAL, "%.*s~", w - 1, name);
}

/* Rows the table has room for, from line y to the footer. */
static unsigned table_room(int y)
{
	return LINES - 1 > y ? (unsigned)(LINES - 1 - y) : 0;
}

static void clamp_scroll(struct top_ui *ui, size_t nrows, unsigned room)
{
	if (nrows <= room)
		ui->top = 0;
	else if (ui->top > nrows - room)
		ui->top = (unsigned)(nrows - room);
}

static void draw_groups(const struct top_frame *f, struct top_ui *ui, int y)
{
	const int *w = col_w;
	int nw = name_width(f), x;
	unsigned room;

	/* the whole line in the table's color, then the titles over it; the
	 * sorted column's title has its direction in the space before it */
	put(y, 0, pair_or(PAIR_TABLE, A_REVERSE), "%*s", COLS, "");
	x = put(y, 0, pair_or(PAIR_TABLE, A_REVERSE), "%*s", id_w(f), top_id_title(f->mode));
	for (unsigned c = 0; c < TOP_NCOLS; c++) {
		bool sorted = ui->order.col == c;
		attr_t a = sorted ? pair_or(PAIR_SORTED, A_BOLD) | A_BOLD :
				    pair_or(PAIR_TABLE, A_REVERSE);
		char mark = !sorted ? ' ' : ui->order.desc ? 'v' : '^';
		char t[16];

		snprintf(t, sizeof(t), "%c%s", mark, top_col_titles[c]);
		if (c == TOP_COL_NAME)
			x = put(y, x, a, "%-*s", nw + 1, t);
		else
			x = put(y, x, a, "%*s", w[c] + 1, mark == ' ' ? t + 1 : t);
	}
	y++;
	room = table_room(y);
	clamp_scroll(ui, f->nrows, room);
	for (unsigned i = ui->top; i < f->nrows && y < LINES - 1; i++, y++) {
		const struct top_row *r = &f->rows[i];
		char v[TOP_NCOLS][16];

		snprintf(v[TOP_COL_CPU], 16, r->rates_known ? "%.1f" : "-", r->cpu_pct);
		top_fmt_bytes(v[TOP_COL_LIVE], 16, r->live);
		if (r->peak_known)
			top_fmt_bytes(v[TOP_COL_PEAK], 16, r->peak);
		else
			strcpy(v[TOP_COL_PEAK], "-");
		if (r->rates_known) {
			fmt_count(v[TOP_COL_ALLOCS], 16, r->allocs_s);
			fmt_count(v[TOP_COL_FREES], 16, r->frees_s);
		} else {
			strcpy(v[TOP_COL_ALLOCS], "-");
			strcpy(v[TOP_COL_FREES], "-");
		}
		if (r->gpu_known) {
			fmt_count(v[TOP_COL_KERNELS], 16, (double)r->kernels);
			top_fmt_bytes(v[TOP_COL_DEVICE], 16, r->device);
			top_fmt_bytes(v[TOP_COL_PINNED], 16, r->pinned);
		} else {
			strcpy(v[TOP_COL_KERNELS], "-");
			strcpy(v[TOP_COL_DEVICE], "-");
			strcpy(v[TOP_COL_PINNED], "-");
		}
		fmt_count(v[TOP_COL_REJECTS], 16, (double)r->rejects);
		fmt_count(v[TOP_COL_YIELDS], 16, (double)r->yields);
		x = put(y, 0, A_NORMAL, "%*u ", id_w(f), r->id);
		draw_name(y, x, r->name, nw);
		x += nw;
		for (unsigned c = TOP_COL_CPU; c < TOP_NCOLS; c++)
			x = put(y, x, A_NORMAL, " %*s", w[c], v[c]);
	}
}

/* The sites view: a row per site, largest in use (or at the peak) first, the group as wide
 * as the longest (within GROUP_MAX_W), the stack cut at the right edge. */
static void draw_sites(const struct top_frame *f, struct top_ui *ui, int y)
{
	attr_t title = pair_or(PAIR_TABLE, A_REVERSE),
	       sorted = pair_or(PAIR_SORTED, A_BOLD) | A_BOLD;
	bool by_peak = f->sites_by_peak;
	char line[128];
	const char *empty = top_sites_empty(f, line, sizeof(line));
	int gw = 5, x;

	for (unsigned i = 0; i < f->nsites; i++) {
		int len = (int)strlen(f->sites[i].group);
		if (len > gw)
			gw = len < GROUP_MAX_W ? len : GROUP_MAX_W;
	}
	put(y, 0, title, "%*s", COLS, "");
	/* the sorted column's title in its color, with its direction */
	x = put(y, 0, by_peak ? title : sorted, "%7s", by_peak ? "IN USE" : "vIN USE");
	x = put(y, x, by_peak ? sorted : title, " %7s", by_peak ? "vPEAK" : "PEAK");
	put(y, x, title, " %7s %9s %-*s %7s STACK, leaf first (%u of %zu sites)", "OBJECTS",
	    "ALLOCATED", gw, "GROUP", "PID", f->nsites, f->sites_total);
	y++;
	if (empty) {
		put(y, 1, A_NORMAL, "%s", empty);
		return;
	}
	clamp_scroll(ui, f->nsites, table_room(y));
	for (unsigned i = ui->top; i < f->nsites && y < LINES - 1; i++, y++) {
		const struct top_site_row *r = &f->sites[i];
		char in[16], pk[16] = "-", objs[16], al[16];

		top_fmt_bytes(in, sizeof(in), r->inuse);
		if (r->peak_known)
			top_fmt_bytes(pk, sizeof(pk), r->peak);
		fmt_count(objs, sizeof(objs), (double)r->objects);
		top_fmt_bytes(al, sizeof(al), r->allocated);
		x = put(y, 0, A_NORMAL, "%7s %7s %7s %9s ", in, pk, objs, al);
		draw_name(y, x, r->group, gw);
		x += gw;
		if (r->pid > 0)
			x = put(y, x, A_NORMAL, " %7d ", (int)r->pid);
		else
			x = put(y, x, A_NORMAL, " %7s ", "-");
		if (x < COLS)
			draw_name(y, x, r->stack, COLS - x);
	}
}

static void draw_threads(const struct top_frame *f, struct top_ui *ui, int y)
{
	int nw = 16; /* a sanitized thread name is 60 bytes at most: shown whole */
	unsigned room;

	for (size_t i = 0; i < f->nthreads; i++) {
		int len = (int)strlen(f->threads[i].name);
		if (len > nw)
			nw = len;
	}
	put(y, 0, pair_or(PAIR_TABLE, A_REVERSE), "%*s", COLS, "");
	put(y, 0, pair_or(PAIR_TABLE, A_REVERSE), "%8s %-*s %s   (%zu threads)", "TID", nw, "NAME",
	    "GROUP", f->nthreads);
	y++;
	room = table_room(y);
	clamp_scroll(ui, f->nthreads, room);
	for (size_t i = ui->top; i < f->nthreads && y < LINES - 1; i++, y++) {
		const struct top_thread *t = &f->threads[i];

		put(y, 0, A_NORMAL, "%8u %-*s %u %s", t->tid, nw, t->name, t->group, t->group_name);
	}
}

/* The keys, as htop shows them: the key in color, what it does beside it. */
static void draw_footer(const struct top_ui *ui)
{
	static const char *const keys[][2] = {
		{ "q", "Quit" },    { "p", "Pause" },
		{ "t", "Threads" }, { "v", "View" },
		{ "h", "Sites" },   { "s", "Sort" },
		{ "r", "Reverse" }, { "nclmafkdiey", "Sort by column" },
		{ "^L", "Redraw" },
	};
	int y = LINES - 1, x = 0;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *label = keys[i][1];

		if (i == 2 && ui->threads)
			label = "Groups";
		if (i == 1 && ui->paused)
			label = "Resume";
		if (i == 4 && ui->mode == TOP_MODE_SITES)
			label = "Groups";
		x = put(y, x, pair_or(PAIR_KEY, A_REVERSE), "%s", keys[i][0]);
		x = put(y, x, A_NORMAL, " %s  ", label);
	}
}

void top_view_draw(const struct top_frame *f, struct top_ui *ui)
{
	int y;

	if (!screen)
		return;
	erase();
	if (LINES < 8 || COLS < 40) {
		put(0, 0, A_NORMAL, "tally top: too small (%dx%d)", COLS, LINES);
		refresh();
		return;
	}
	draw_header(f, ui);
	y = draw_identity(f, 3);
	if (ui->threads)
		draw_threads(f, ui, y);
	else if (f->mode == TOP_MODE_SITES)
		draw_sites(f, ui, y);
	else
		draw_groups(f, ui, y);
	draw_footer(ui);
	refresh();
}

void top_view_repaint(void)
{
	if (screen)
		clearok(curscr, TRUE);
}

/* The keys that move the table; false for any other key. */
static bool scroll_key(struct top_ui *ui, int ch)
{
	unsigned page = LINES > 12 ? (unsigned)LINES - 12 : 1;

	switch (ch) {
	case KEY_UP:
		ui->top -= ui->top > 0;
		return true;
	case KEY_DOWN:
		ui->top++; /* clamped by the next draw */
		return true;
	case KEY_PPAGE:
		ui->top = ui->top > page ? ui->top - page : 0;
		return true;
	case KEY_NPAGE:
		ui->top += page;
		return true;
	case KEY_HOME:
		ui->top = 0;
		return true;
	case KEY_END:
		ui->top = 1u << 30;
		return true;
	default:
		return false;
	}
}

/* What one key does to the view. */
static enum top_view_event key(struct top_ui *ui, int ch)
{
	int col;

	switch (ch) {
	case 'q':
	case 'Q':
		return TOP_VIEW_QUIT;
	case 'p':
	case ' ':
		ui->paused = !ui->paused;
		return TOP_VIEW_REDRAW;
	case 't':
		ui->threads = !ui->threads;
		ui->top = 0;
		return TOP_VIEW_REDRAW;
	case 's':
	case '>':
		top_order_step(&ui->order, 1);
		return TOP_VIEW_RESORT;
	case '<':
		top_order_step(&ui->order, -1);
		return TOP_VIEW_RESORT;
	case 'r':
		ui->order.desc = !ui->order.desc;
		return TOP_VIEW_RESORT;
	case 'v':
		ui->mode = (enum top_mode)((ui->mode + 1) % TOP_MODES);
		ui->top = 0;
		ui->threads = false;
		return TOP_VIEW_REMODE;
	case 'h': /* the heap's sites, and back to where a view starts */
		ui->mode = ui->mode == TOP_MODE_SITES ? TOP_MODE_GROUPS : TOP_MODE_SITES;
		ui->top = 0;
		ui->threads = false;
		return TOP_VIEW_REMODE;
	case 12: /* ^L: the target or someone wrote over the screen */
		clearok(curscr, TRUE);
		return TOP_VIEW_REDRAW;
	case KEY_RESIZE:
		return TOP_VIEW_REDRAW;
	}
	if (scroll_key(ui, ch))
		return TOP_VIEW_REDRAW;
	col = top_col_of_key(ch);
	if (col < 0)
		return TOP_VIEW_IDLE;
	top_order_pick(&ui->order, (enum top_col)col);
	return TOP_VIEW_RESORT;
}

enum top_view_event top_view_input(struct top_ui *ui, int wait_ms)
{
	enum top_view_event ev = TOP_VIEW_IDLE;
	int ch;

	if (!screen)
		return TOP_VIEW_IDLE;
	timeout(wait_ms);
	while ((ch = getch()) != ERR) {
		enum top_view_event e = key(ui, ch);

		if (e == TOP_VIEW_QUIT)
			return TOP_VIEW_QUIT;
		timeout(0);
		if (e > ev)
			ev = e;
	}
	return ev;
}
