/* Hand-written replacement for BookSim2's bison/flex config parser (src/config.y, src/config.l),
 * so BookSim2 builds where bison and flex are not installed: copy this file to src/y.tab.c, create
 * empty src/y.tab.h and src/lex.yy.c, touch the three, then make (docs/switch.md "Speed").
 * Grammar of config.y: statements  STR '=' (STR | NUM | FNUM) ';'  with // comments and
 * whitespace ignored, as config.l tokenizes them. Values that parse whole as an integer are
 * NUM, as a decimal number FNUM, anything else (names, {lists}) STR. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int config_input(char *, int);
void config_assign_string(char const *field, char const *value);
void config_assign_int(char const *field, int value);
void config_assign_float(char const *field, double value);
void config_error(char const *msg, int lineno);

static char *trim(char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

static int is_int(const char *s) {
  if (*s == '-') s++;
  if (!*s) return 0;
  for (; *s; s++) if (!isdigit((unsigned char)*s)) return 0;
  return 1;
}

static int is_float(const char *s) {
  char *end;
  if (!*s) return 0;
  if (!(isdigit((unsigned char)*s) || *s == '-' || *s == '.')) return 0;
  strtod(s, &end);
  return *end == 0;
}

int yyparse(void) {
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (cap - len < 4096) { cap *= 2; buf = realloc(buf, cap); }
    int r = config_input(buf + len, (int)(cap - len - 1));
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = 0;
  /* strip comments */
  for (char *p = buf; *p; p++) {
    if (p[0] == '/' && p[1] == '/') { while (*p && *p != '\n') *p++ = ' '; if (!*p) break; }
  }
  int lineno = 1;
  char *p = buf;
  while (*p) {
    char *semi = strchr(p, ';');
    if (!semi) { if (*trim(p)) config_error("syntax error", lineno); break; }
    *semi = 0;
    for (char *q = p; q < semi; q++) if (*q == '\n') lineno++;
    char *eq = strchr(p, '=');
    if (!eq) { if (*trim(p)) config_error("syntax error", lineno); p = semi + 1; continue; }
    *eq = 0;
    char *k = trim(p), *v = trim(eq + 1);
    if (is_int(v)) config_assign_int(k, atoi(v));
    else if (is_float(v)) config_assign_float(k, atof(v));
    else config_assign_string(k, v);
    p = semi + 1;
  }
  free(buf);
  return 0;
}
