/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Policy parser and matcher: malformed files (each with the file:line message
 * it must give) and matching semantics. Table-driven; no MPI.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nf_decide.h"
#include "nf_layout.h"
#include "nf_policy.h"
#include "nf_profile.h"

#ifndef NF_POLICY_FIXTURES
#define NF_POLICY_FIXTURES "tests/policy"
#endif

/* Diagnostics collected as "file:line: message\n" lines. */
typedef struct diags {
    char text[8192];
    int count[3];
} diags_t;

static void collect(const nf_policy_diag_t *d, void *arg)
{
    diags_t *g = arg;
    size_t used = strlen(g->text);
    snprintf(g->text + used, sizeof(g->text) - used, "%s:%d: %s\n", d->file, d->line, d->message);
    g->count[d->severity]++;
}

static nf_status_t parse(const char *text, size_t len, diags_t *g, nf_policy_t **p)
{
    memset(g, 0, sizeof(*g));
    *p = NULL;
    return nf_policy_parse(text, len, "t.policy", collect, g, p);
}

#define HDR "[policy]\nversion = 1\n"
#define HDR2 "[policy]\nversion = 2\n" /* ef_decay needs version 2 */
#define HDR3 "[policy]\nversion = 3\n" /* warmup and scale_block need version 3 */
#define HDR4 "[policy]\nversion = 4\n" /* the integer routes and block need version 4 */

/* ------------------------------------------------------------ malformed */

enum { LOAD_FAILS, RULE_DROPPED, WARNS };

typedef struct bad_case {
    const char *what;
    const char *text;
    int outcome;
    const char *expect;  /* substring of the diagnostics, "file:line: ..." */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"empty file", "", LOAD_FAILS, "t.policy:1: empty policy file"},
    {"only comments", "# nothing\n; here\n\n", LOAD_FAILS, "t.policy:1: empty policy file"},
    {"missing version", "[policy]\nstats = 1\n[default]\nroute = fp32\n", LOAD_FAILS,
     "t.policy:1: [policy] has no version (expected version = 1, 2, 3 or 4)"},
    {"no policy section", "[rule a]\nroute = fp32\n", LOAD_FAILS, "t.policy:1: no [policy] section"},
    {"bad version", "[policy]\nversion = 5\n", LOAD_FAILS,
     "t.policy:2: unsupported policy version '5' (expected version = 1, 2, 3 or 4)"},
    {"version zero", "[policy]\nversion = 0\n", LOAD_FAILS,
     "t.policy:2: unsupported policy version '0' (expected version = 1, 2, 3 or 4)"},
    {"bad section", HDR "[rules a]\nroute = fp32\n", LOAD_FAILS,
     "t.policy:3: bad section header '[rules a]' (expected [policy], [rule NAME] or [default])"},
    {"unterminated section", HDR "\n[rule a\nroute = fp32\n", LOAD_FAILS,
     "t.policy:4: bad section header '[rule a' (missing ']')"},
    {"text after section", HDR "[rule a] x\n", LOAD_FAILS, "t.policy:3: bad section header '[rule a] x' (text after ']')"},
    {"rule without name", HDR "[rule]\nroute = fp32\n", LOAD_FAILS, "t.policy:3: bad section header '[rule]'"},
    {"bad rule name", HDR "[rule a/b]\nroute = fp32\n", LOAD_FAILS, "t.policy:3: bad rule name 'a/b'"},
    {"duplicate policy", HDR "[policy]\n", LOAD_FAILS, "t.policy:3: duplicate [policy] section (first at line 1)"},
    {"duplicate default", HDR "[default]\nroute = fp32\n[default]\n", LOAD_FAILS,
     "t.policy:5: duplicate [default] section (first at line 3)"},
    {"key outside section", "version = 1\n[policy]\n", LOAD_FAILS, "t.policy:1: key 'version' outside any section"},
    {"no equals sign", HDR "[rule a]\nroute fp32\n", LOAD_FAILS,
     "t.policy:4: expected 'key = value', '[section]' or a comment, found 'route fp32'"},
    {"binary junk", "[policy]\nversion = 1\n\x7f" "ELF\x02\x01\x01\x00\x00", LOAD_FAILS,
     "t.policy:3: binary data (byte 0x7f at column 1)"},
    {"NUL byte", HDR "[rule a]\nroute = fp\0" "32\n", LOAD_FAILS, "t.policy:4: binary data (byte 0x00 at column 11)"},
    {"unknown route", HDR "\n[rule a]\nbytes = 1M-\nroute = quaternary\n", RULE_DROPPED,
     "t.policy:6: unknown route 'quaternary' (expected pmpi|fp32|binary|ternary|bf16|int4|int3|int2|auto); "
     "rule 'a' disabled"},
    {"unknown integer route", HDR4 "[rule a]\nroute = int8\n", RULE_DROPPED,
     "t.policy:4: unknown route 'int8' (expected pmpi|fp32|binary|ternary|bf16|int4|int3|int2|auto)"},
    {"unknown key", HDR "[rule a]\nbyte = 1M-\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: unknown key 'byte' (expected region|comm|comm_size|datatype|op|bytes|calls|route|ef|ef_decay|gamma|segment|warmup|scale_block|block); rule 'a' disabled"},
    {"bad number", HDR "[rule a]\nbytes = 12Q\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: bad bytes '12Q' (expected a size such as 4096, 64K or 1M"},
    {"number too large", HDR "[rule a]\ncalls = 99999999999999999999999\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: calls value '99999999999999999999999' out of range"},
    {"size overflow", HDR "[rule a]\nbytes = 20000000000G\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: bytes value '20000000000G' out of range"},
    {"comm_size zero", HDR "[rule a]\ncomm_size = 0-4\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: comm_size value '0-4' out of range (1..2147483647)"},
    {"inverted range", HDR "[rule a]\nbytes = 10-5\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: empty bytes range '10-5' (low end above high end); rule 'a' disabled"},
    {"overlapping ranges", HDR "[rule a]\ncalls = 0-10, 5-20\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: overlapping calls ranges '0-10' and '5-20'; rule 'a' disabled"},
    {"lone dash", HDR "[rule a]\ncalls = -\nroute = fp32\n", RULE_DROPPED, "t.policy:4: bad calls '-'"},
    {"empty list item", HDR "[rule a]\nop = sum,,max\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: empty item in the list for 'op'"},
    {"unknown datatype", HDR "[rule a]\ndatatype = flaot\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: unknown datatype 'flaot'"},
    {"unknown op", HDR "[rule a]\nop = avg\nroute = fp32\n", RULE_DROPPED, "t.policy:4: unknown op 'avg'"},
    {"bad ef", HDR "[rule a]\nroute = binary\nef = maybe\n", RULE_DROPPED,
     "t.policy:5: bad ef 'maybe' (expected on|off|inherit)"},
    {"negative gamma", HDR "[rule a]\nroute = ternary\ngamma = -1\n", RULE_DROPPED,
     "t.policy:5: bad gamma '-1' (expected a number >= 0"},
    {"gamma nan", HDR "[rule a]\nroute = ternary\ngamma = nan\n", RULE_DROPPED, "t.policy:5: bad gamma 'nan'"},
    {"ef_decay in version 1", HDR "[rule a]\nroute = binary\n\nef_decay = 0.5\n", RULE_DROPPED,
     "t.policy:6: ef_decay needs version = 2 in [policy] (this file says 1); rule 'a' disabled"},
    {"ef_decay in version 1, [policy] last", "[default]\nef_decay = 0.5\nroute = binary\n[policy]\nversion = 1\n",
     RULE_DROPPED, "t.policy:2: ef_decay needs version = 2 in [policy] (this file says 1); [default] disabled"},
    {"warmup in version 2", HDR2 "[rule a]\nroute = binary\nwarmup = 10\n", RULE_DROPPED,
     "t.policy:5: warmup needs version = 3 in [policy] (this file says 2); rule 'a' disabled"},
    {"warmup in version 2, [default]", HDR2 "[default]\nroute = binary\nwarmup = 10\n", RULE_DROPPED,
     "t.policy:5: warmup needs version = 3 in [policy] (this file says 2); [default] disabled"},
    {"warmup negative", HDR3 "[rule a]\nroute = binary\nwarmup = -1\n", RULE_DROPPED,
     "t.policy:5: bad warmup '-1' (expected a number of calls from 0 to 1000000000); rule 'a' disabled"},
    {"warmup too large", HDR3 "[rule a]\nroute = binary\nwarmup = 1000000001\n", RULE_DROPPED,
     "t.policy:5: bad warmup '1000000001'"},
    {"warmup word", HDR3 "[rule a]\nroute = binary\nwarmup = long\n", RULE_DROPPED,
     "t.policy:5: bad warmup 'long'"},
    {"ef_decay above 1", HDR2 "[rule a]\nroute = binary\nef_decay = 1.5\n", RULE_DROPPED,
     "t.policy:5: bad ef_decay '1.5' (expected a number from 0 to 1, such as 0.5); rule 'a' disabled"},
    {"ef_decay negative", HDR2 "[rule a]\nroute = binary\n\nef_decay = -0.1\n", RULE_DROPPED,
     "t.policy:6: bad ef_decay '-0.1' (expected a number from 0 to 1"},
    {"ef_decay nan", HDR2 "[rule a]\nroute = ternary\nef_decay = nan\n", RULE_DROPPED, "t.policy:5: bad ef_decay 'nan'"},
    {"ef_decay inf", HDR2 "[rule a]\nroute = ternary\nef_decay = inf\n", RULE_DROPPED, "t.policy:5: bad ef_decay 'inf'"},
    {"ef_decay word", HDR2 "[rule a]\nroute = binary\nef_decay = half\n", RULE_DROPPED, "t.policy:5: bad ef_decay 'half'"},
    {"ef_decay comma", HDR2 "[rule a]\nroute = binary\nef_decay = 0,5\n", RULE_DROPPED, "t.policy:5: bad ef_decay '0,5'"},
    {"ef_decay trailing", HDR2 "[rule a]\nroute = binary\nef_decay = 0.5x\n", RULE_DROPPED, "t.policy:5: bad ef_decay '0.5x'"},
    {"ef_decay inherit", HDR2 "[rule a]\nroute = binary\nef_decay = inherit\n", RULE_DROPPED,
     "t.policy:5: bad ef_decay 'inherit'"},
    {"ef_decay twice", HDR2 "[rule a]\nroute = binary\nef_decay = 0.5\nef_decay = 0.5\n", RULE_DROPPED,
     "t.policy:6: duplicate key 'ef_decay' (first set at line 5)"},
    {"ef_decay empty", HDR2 "[rule a]\nroute = binary\nef_decay =\n", RULE_DROPPED, "t.policy:5: empty value for 'ef_decay'"},
    {"ef_decay bad in default", HDR2 "[default]\nroute = binary\nef_decay = 2\n", RULE_DROPPED,
     "t.policy:5: bad ef_decay '2' (expected a number from 0 to 1, such as 0.5); [default] disabled (route pmpi)"},
    {"scale_block in version 2", HDR2 "[rule a]\nroute = binary\nscale_block = 512\n", RULE_DROPPED,
     "t.policy:5: scale_block needs version = 3 in [policy] (this file says 2); rule 'a' disabled"},
    {"scale_block in version 1, [policy] last", "[default]\nscale_block = 1024\nroute = binary\n[policy]\nversion = 1\n",
     RULE_DROPPED, "t.policy:2: scale_block needs version = 3 in [policy] (this file says 1); [default] disabled"},
    {"scale_block and ef_decay in version 1", HDR "[rule a]\nroute = binary\nscale_block = 512\nef_decay = 0.5\n",
     RULE_DROPPED, "t.policy:6: ef_decay needs version = 2 in [policy] (this file says 1); rule 'a' disabled"},
    {"scale_block not lines", HDR3 "[rule a]\nroute = binary\nscale_block = 500\n", RULE_DROPPED,
     "t.policy:5: bad scale_block '500' (expected 0 or a multiple of 512 up to 2^30, such as 512); rule 'a' disabled"},
    {"scale_block negative", HDR3 "[rule a]\nroute = binary\nscale_block = -512\n", RULE_DROPPED,
     "t.policy:5: bad scale_block '-512'"},
    {"scale_block too large", HDR3 "[rule a]\nroute = binary\nscale_block = 2147483648\n", RULE_DROPPED,
     "t.policy:5: bad scale_block '2147483648'"},
    {"scale_block fraction", HDR3 "[rule a]\nroute = binary\nscale_block = 512.0\n", RULE_DROPPED,
     "t.policy:5: bad scale_block '512.0'"},
    {"scale_block word", HDR3 "[rule a]\nroute = binary\nscale_block = line\n", RULE_DROPPED,
     "t.policy:5: bad scale_block 'line'"},
    {"scale_block twice", HDR3 "[rule a]\nroute = binary\nscale_block = 512\nscale_block = 512\n", RULE_DROPPED,
     "t.policy:6: duplicate key 'scale_block' (first set at line 5)"},
    {"scale_block bad in default", HDR3 "[default]\nroute = binary\nscale_block = 100\n", RULE_DROPPED,
     "t.policy:5: bad scale_block '100' (expected 0 or a multiple of 512 up to 2^30, such as 512); [default] disabled (route pmpi)"},
    {"block in version 3", HDR3 "[rule a]\nroute = int4\nblock = 128\n", RULE_DROPPED,
     "t.policy:5: block needs version = 4 in [policy] (this file says 3); rule 'a' disabled"},
    {"block in version 1, [default], [policy] last", "[default]\nblock = 64\nroute = int4\n[policy]\nversion = 1\n",
     RULE_DROPPED, "t.policy:2: block needs version = 4 in [policy] (this file says 1); [default] disabled"},
    {"int4 in version 3", HDR3 "[rule a]\nroute = int4\n", RULE_DROPPED,
     "t.policy:4: route int4 needs version = 4 in [policy] (this file says 3); rule 'a' disabled"},
    {"int3 in version 1", HDR "[rule a]\nroute = Int3\n", RULE_DROPPED,
     "t.policy:4: route int3 needs version = 4 in [policy] (this file says 1); rule 'a' disabled"},
    {"int2 in version 2, [default]", HDR2 "[default]\nroute = int2\n", RULE_DROPPED,
     "t.policy:4: route int2 needs version = 4 in [policy] (this file says 2); [default] disabled (route pmpi)"},
    {"block zero", HDR4 "[rule a]\nroute = int4\nblock = 0\n", RULE_DROPPED,
     "t.policy:5: bad block '0' (expected a power of two from 32 to 4096); rule 'a' disabled"},
    {"block 16", HDR4 "[rule a]\nroute = int4\nblock = 16\n", RULE_DROPPED,
     "t.policy:5: bad block '16' (expected a power of two from 32 to 4096); rule 'a' disabled"},
    {"block 100", HDR4 "[rule a]\nroute = int4\nblock = 100\n", RULE_DROPPED,
     "t.policy:5: bad block '100' (expected a power of two from 32 to 4096); rule 'a' disabled"},
    {"block 8192", HDR4 "[rule a]\nroute = int3\nblock = 8192\n", RULE_DROPPED,
     "t.policy:5: bad block '8192' (expected a power of two from 32 to 4096); rule 'a' disabled"},
    {"block negative", HDR4 "[rule a]\nroute = int2\nblock = -1\n", RULE_DROPPED,
     "t.policy:5: bad block '-1' (expected a power of two from 32 to 4096); rule 'a' disabled"},
    {"block word", HDR4 "[rule a]\nroute = int4\nblock = abc\n", RULE_DROPPED,
     "t.policy:5: bad block 'abc' (expected a power of two from 32 to 4096); rule 'a' disabled"},
    {"block fraction", HDR4 "[rule a]\nroute = int4\nblock = 128.0\n", RULE_DROPPED,
     "t.policy:5: bad block '128.0'"},
    {"block huge", HDR4 "[rule a]\nroute = int4\nblock = 99999999999999999999999\n", RULE_DROPPED,
     "t.policy:5: bad block '99999999999999999999999'"},
    {"block twice", HDR4 "[rule a]\nroute = int4\nblock = 64\nblock = 64\n", RULE_DROPPED,
     "t.policy:6: duplicate key 'block' (first set at line 5)"},
    {"block empty", HDR4 "[rule a]\nroute = int4\nblock =\n", RULE_DROPPED, "t.policy:5: empty value for 'block'"},
    {"block bad in default", HDR4 "[default]\nroute = int4\nblock = 100\n", RULE_DROPPED,
     "t.policy:5: bad block '100' (expected a power of two from 32 to 4096); [default] disabled (route pmpi)"},
    {"block 16 in default", HDR4 "[default]\nblock = 16\nroute = int4\n", RULE_DROPPED,
     "t.policy:4: bad block '16' (expected a power of two from 32 to 4096); [default] disabled (route pmpi)"},
    {"bad segment", HDR "[rule a]\nroute = binary\nsegment = layer\n", RULE_DROPPED,
     "t.policy:5: bad segment 'layer' (expected region|buffer)"},
    {"bad glob", HDR "[rule a]\nregion = layer[0-3\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: unterminated '[' in region pattern 'layer[0-3'"},
    {"duplicate key", HDR "[rule a]\nroute = fp32\n\nroute = binary\n", RULE_DROPPED,
     "t.policy:6: duplicate key 'route' (first set at line 4)"},
    {"empty value", HDR "[rule a]\nroute =\n", RULE_DROPPED, "t.policy:4: empty value for 'route'"},
    {"no route", HDR "[rule a]\nbytes = 1K\n", RULE_DROPPED,
     "t.policy:3: rule 'a' has no route (expected route = pmpi|fp32|binary|ternary|bf16|int4|int3|int2|auto); "
     "rule 'a' disabled"},
    {"duplicate rule name", HDR "[rule a]\nroute = fp32\n[rule a]\nroute = binary\n", RULE_DROPPED,
     "t.policy:5: duplicate rule name 'a' (first at line 3)"},
    {"match key in default", HDR "[default]\nbytes = 1M-\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: key 'bytes' cannot be used in [default] (expected route|ef|ef_decay|gamma|segment|warmup|scale_block|block); [default] disabled"},
    {"unknown policy key", HDR "colour = blue\n", RULE_DROPPED,
     "t.policy:3: unknown key 'colour' in [policy] (expected version|cxl_node|stats|trace|regions|calibrate|"
     "calibrate_calls|admit_cosine|profile|health|cooldown|cooldown_max|loss_spike|loss_window|ef_growth); "
     "ignored"},
    {"health maybe", HDR "health = maybe\n", RULE_DROPPED,
     "t.policy:3: bad health 'maybe' (expected on|off); setting ignored"},
    {"cooldown zero", HDR "cooldown = 0\n", RULE_DROPPED,
     "t.policy:3: bad cooldown '0' (expected an integer from 1 to 1000000); setting ignored"},
    {"loss_window word", HDR "loss_window = ten\n", RULE_DROPPED, "t.policy:3: bad loss_window 'ten'"},
    {"loss_spike zero", HDR "loss_spike = 0\n", RULE_DROPPED,
     "t.policy:3: bad loss_spike '0' (expected a number > 0, such as 2.0); setting ignored"},
    {"ef_growth comma", HDR "ef_growth = 4,5\n", RULE_DROPPED, "t.policy:3: bad ef_growth '4,5'"},
    {"bad cxl_node", HDR "cxl_node = -3\n", RULE_DROPPED, "t.policy:3: bad cxl_node '-3'"},
    {"calibrate_calls zero", HDR "calibrate_calls = 0\n", RULE_DROPPED,
     "t.policy:3: bad calibrate_calls '0' (expected an integer from 1 to 4294967295); setting ignored"},
    {"calibrate_calls word", HDR "calibrate_calls = many\n", RULE_DROPPED, "t.policy:3: bad calibrate_calls 'many'"},
    {"calibrate_calls huge", HDR "calibrate_calls = 4294967296\n", RULE_DROPPED,
     "t.policy:3: bad calibrate_calls '4294967296'"},
    {"calibrate_calls suffix", HDR "calibrate_calls = 1K\n", RULE_DROPPED, "t.policy:3: bad calibrate_calls '1K'"},
    {"admit_cosine above 1", HDR "admit_cosine = 1.01\n", RULE_DROPPED,
     "t.policy:3: bad admit_cosine '1.01' (expected a number from -1 to 1, such as 0.5); setting ignored"},
    {"admit_cosine below -1", HDR "admit_cosine = -2\n", RULE_DROPPED, "t.policy:3: bad admit_cosine '-2'"},
    {"admit_cosine nan", HDR "admit_cosine = nan\n", RULE_DROPPED, "t.policy:3: bad admit_cosine 'nan'"},
    {"admit_cosine comma", HDR "admit_cosine = 0,5\n", RULE_DROPPED, "t.policy:3: bad admit_cosine '0,5'"},
    {"empty regions", HDR "regions =\n", RULE_DROPPED, "t.policy:3: empty value for 'regions'; setting ignored"},
    {"empty calibrate", HDR "calibrate = \n", RULE_DROPPED, "t.policy:3: empty value for 'calibrate'"},
    {"empty profile", HDR "profile =  ; none\n", RULE_DROPPED, "t.policy:3: empty value for 'profile'"},
    {"shadowed rule", HDR "[rule big]\nbytes = 1M-\nroute = binary\n\n[rule huge]\nbytes = 64M-128M\nroute = fp32\n",
     WARNS, "t.policy:7: rule 'huge' is never used: rule 'big' (line 3) matches every call it matches"},
    {"shadowed by glob", HDR "[rule fc]\nregion = *.fc.*\nroute = fp32\n[rule one]\nregion = net.fc.w\nroute = binary\n",
     WARNS, "t.policy:6: rule 'one' is never used: rule 'fc' (line 3)"},
    {"gamma on binary", HDR "[rule a]\nroute = binary\ngamma = 0.5\n", WARNS,
     "t.policy:5: gamma has no effect on route binary"},
    {"ef_decay on fp32", HDR2 "[rule a]\nroute = fp32\nef_decay = 0.5\n", WARNS,
     "t.policy:5: ef_decay has no effect on route fp32 (only binary, ternary, int4, int3 and int2 keep a residual)"},
    {"ef_decay on bf16 default", HDR2 "[default]\nef_decay = 0\nroute = bf16\n", WARNS,
     "t.policy:4: ef_decay has no effect on route bf16"},
    {"ef_decay with ef off", HDR2 "[rule a]\nroute = ternary\nef = off\nef_decay = 0.5\n", WARNS,
     "t.policy:6: ef_decay has no effect with ef = off"},
    {"scale_block on ternary", HDR3 "[rule a]\nroute = ternary\nscale_block = 512\n", WARNS,
     "t.policy:5: scale_block has no effect on route ternary (only binary has one scale per block)"},
    {"scale_block 0 on fp32 default", HDR3 "[default]\nscale_block = 0\nroute = fp32\n", WARNS,
     "t.policy:4: scale_block has no effect on route fp32"},
    {"scale_block on int4", HDR4 "[rule a]\nroute = int4\nscale_block = 512\n", WARNS,
     "t.policy:5: scale_block has no effect on route int4 (an integer route's scale block is set by block)"},
    {"block on binary", HDR4 "[rule a]\nroute = binary\nblock = 128\n", WARNS,
     "t.policy:5: block has no effect on route binary (only the integer routes have one)"},
    {"block on ternary", HDR4 "[rule a]\nroute = ternary\nblock = 4096\n", WARNS,
     "t.policy:5: block has no effect on route ternary (only the integer routes have one)"},
    {"block on fp32 default", HDR4 "[default]\nblock = 32\nroute = fp32\n", WARNS,
     "t.policy:4: block has no effect on route fp32 (only the integer routes have one)"},
    {"warmup on bf16", HDR3 "[rule a]\nroute = bf16\nwarmup = 5\n", WARNS,
     "t.policy:5: warmup has no effect on route bf16 (only binary, ternary, int4, int3 and int2 warm up on fp32)"},
    {"ef_decay on pmpi", HDR2 "[rule a]\nroute = pmpi\nef_decay = 0.5\n", WARNS,
     "t.policy:5: ef_decay has no effect on route pmpi (only binary, ternary, int4, int3 and int2 keep a residual)"},
    {"gamma on int3", HDR4 "[rule a]\nroute = int3\ngamma = 0.5\n", WARNS,
     "t.policy:5: gamma has no effect on route int3 (only ternary uses it)"},
    {"int2 on doubles", HDR4 "[rule a]\ndatatype = double\nroute = int2\n", WARNS,
     "t.policy:3: rule 'a' never runs int2: low-bit and bf16 routes take only float sums"},
    {"low-bit on doubles", HDR "[rule a]\ndatatype = double\nroute = binary\n", WARNS,
     "t.policy:3: rule 'a' never runs binary: low-bit and bf16 routes take only float sums"},
    {"auto without profile", HDR "regions = m.layout\n[rule a]\nbytes = 1M-\n\nroute = auto\n", WARNS,
     "t.policy:7: route = auto without a profile: every segment takes fp32"},
    {"auto default without profile", HDR "[default]\nroute = Auto\n", WARNS,
     "t.policy:4: route = auto without a profile: every segment takes fp32"},
};

START_TEST(test_malformed)
{
    const bad_case_t *c = &bad_cases[_i];
    nf_policy_t *p;
    diags_t g;
    size_t len = strlen(c->text);
    nf_status_t rc;

    /* The NUL case has its NUL inside: measure to the last newline. */
    if (strcmp(c->what, "NUL byte") == 0)
        len = sizeof(HDR "[rule a]\nroute = fp\0" "32\n") - 1;
    rc = parse(c->text, len, &g, &p);
    ck_assert_msg(strstr(g.text, c->expect) != NULL, "%s: expected '%s' in:\n%s", c->what, c->expect, g.text);
    switch (c->outcome) {
    case LOAD_FAILS:
        ck_assert_msg(rc == NF_ERR_PARSE && p == NULL, "%s: should not load (rc %d)", c->what, rc);
        ck_assert_int_ge(g.count[NF_POLICY_ERROR], 1);
        break;
    case RULE_DROPPED:
        ck_assert_msg(rc == NF_OK && p != NULL, "%s: should load (rc %d):\n%s", c->what, rc, g.text);
        ck_assert_int_eq(g.count[NF_POLICY_ERROR], 0);
        ck_assert_int_ge(g.count[NF_POLICY_DISABLED], 1);
        break;
    case WARNS:
        ck_assert_msg(rc == NF_OK && p != NULL, "%s: should load (rc %d)", c->what, rc);
        ck_assert_int_eq(g.count[NF_POLICY_DISABLED] + g.count[NF_POLICY_ERROR], 0);
        ck_assert_int_ge(g.count[NF_POLICY_WARNING], 1);
        break;
    }
    nf_policy_free(p);
}
END_TEST

/* A rule with a bad value is dropped; the rest of the file still decides. */
START_TEST(test_bad_rule_rest_loads)
{
    static const char text[] = HDR "[rule a]\nroute = quaternary\n[rule b]\nroute = fp32\n";
    nf_policy_query_t q = {NULL, "w", 4, NF_DT_FLOAT, NF_OP_SUM, 64, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_int_eq(nf_policy_rule_count(p), 2);
    ck_assert_int_eq(nf_policy_disabled_count(p), 1);
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "b");
    ck_assert_int_eq(a.route, NF_ROUTE_FP32);
    nf_policy_free(p);
}
END_TEST

/* Fortran's REAL is a float: a low-bit rule on real sums draws no warning. */
START_TEST(test_lowbit_real_clean)
{
    static const char text[] = HDR "[rule r]\ndatatype = real\nop = sum\nroute = binary\n";
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "a binary rule on real sums should be clean, got %s", g.text);
    nf_policy_free(p);
}
END_TEST

/* Lines longer than inih's buffer are an error at their own line, and do
 * not shift the line numbers of what follows. */
START_TEST(test_long_lines)
{
    size_t n = 100000;
    char *text = malloc(n + 64), expect[64];
    nf_policy_t *p;
    diags_t g;

    strcpy(text, HDR "[rule a]\nregion = ");
    memset(text + strlen(text), 'x', n);
    strcpy(text + strlen(HDR "[rule a]\nregion = ") + n, "\nroute = fp32\n");
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_ERR_PARSE);
    snprintf(expect, sizeof(expect), "t.policy:4: line too long (%zu characters", n + 9);
    ck_assert_msg(strstr(g.text, expect) != NULL, "got %s", g.text);

    /* A long comment is harmless, and line numbers stay right after it. */
    strcpy(text, "# ");
    memset(text + 2, 'c', n);
    strcpy(text + 2 + n, "\n" HDR "[rule a]\nroute = warp\n");
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(strstr(g.text, "t.policy:5: unknown route 'warp'") != NULL, "got %s", g.text);
    nf_policy_free(p);
    free(text);
}
END_TEST

static char *fixture(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof(path), "%s/%s", NF_POLICY_FIXTURES, name);
    return path;
}

/* A file is bounded: at most 1024 rules. */
START_TEST(test_too_many_rules)
{
    size_t cap = 1100 * 40, used;
    char *text = malloc(cap);
    nf_policy_t *p;
    diags_t g;

    used = (size_t)snprintf(text, cap, HDR);
    for (int i = 0; i < 1025; i++)
        used += (size_t)snprintf(text + used, cap - used, "[rule r%d]\ncalls = %d\nroute = fp32\n", i, i);
    ck_assert_int_eq(parse(text, used, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "t.policy:3075: too many rules (at most 1024)") != NULL, "got %s", g.text);
    free(text);
}
END_TEST

START_TEST(test_files)
{
    nf_policy_t *p = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load("/nonexistent/x.policy", collect, &g, &p), NF_ERR_IO);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(g.text, "/nonexistent/x.policy:0: cannot open: No such file") != NULL,
                  "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("empty.policy"), collect, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "empty.policy:1: empty policy file") != NULL, "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("junk.policy"), collect, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "junk.policy:2: binary data (byte 0x1a at column 1)") != NULL, "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("bad_route.policy"), collect, &g, &p), NF_OK);
    ck_assert_msg(strstr(g.text, "bad_route.policy:6: unknown route 'quaternary'") != NULL, "got %s", g.text);
    nf_policy_free(p);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("example.policy"), collect, &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "example.policy should be clean, got %s", g.text);
    ck_assert_int_eq(nf_policy_cxl_node(p), 1);
    ck_assert_str_eq(nf_policy_stats(p), "1");
    ck_assert_ptr_null(nf_policy_trace(p));
    nf_policy_free(p);
}
END_TEST

/* Paths that are not regular files are refused at once, by name: a FIFO
 * must not block the open (it used to hang MPI_Init on every rank), a
 * device must not be read forever. Check's timeout catches a hang. */
static const struct special_case {
    const char *path; /* "@fifo", "@dir", "@big": made in a temp directory */
    nf_status_t status;
    const char *message;
} special_cases[] = {
    {"@fifo", NF_ERR_IO, ":0: not a regular file (a FIFO)"},
    {"@dir", NF_ERR_IO, ":0: not a regular file (a directory)"},
    {"/dev/zero", NF_ERR_IO, "/dev/zero:0: not a regular file (a character device)"},
    {"/dev/null", NF_ERR_IO, "/dev/null:0: not a regular file (a character device)"},
    {"@big", NF_ERR_PARSE, ":0: larger than 1048576 bytes"},
};

static const char *special_path(const char *what, char *dir, char *path, size_t n)
{
    if (what[0] != '@')
        return what;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, n, "%s/%s", dir, what + 1);
    if (strcmp(what, "@fifo") == 0) {
        ck_assert_int_eq(mkfifo(path, 0600), 0);
    } else if (strcmp(what, "@dir") == 0) {
        ck_assert_int_eq(mkdir(path, 0700), 0);
    } else {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        for (int i = 0; i <= (1 << 20) / 16; i++)
            fputs("# padding line.\n", f); /* 16 bytes */
        fclose(f);
    }
    return path;
}

START_TEST(test_special_files)
{
    const struct special_case *c = &special_cases[_i];
    char dir[] = "/tmp/nfpolXXXXXX", buf[256];
    const char *path = special_path(c->path, dir, buf, sizeof(buf));
    nf_policy_t *p = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(path, collect, &g, &p), c->status);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(g.count[NF_POLICY_ERROR], 1);
    ck_assert_msg(strstr(g.text, path) == g.text && strstr(g.text, c->message) != NULL,
                  "%s: got %s", path, g.text);
    if (path == buf) {
        if (remove(buf) != 0 || rmdir(dir) != 0)
            ck_abort_msg("cannot clean up %s", dir);
    }
}
END_TEST

/* ------------------------------------------------------------ matching */

static const char match_text[] =
    "# matching fixture\n"
    "[policy]\n"
    "version = 1\n"
    "\n"
    "[rule warmup]\n"                 /* line 5 */
    "calls = 0-4\n"
    "route = fp32\n"
    "\n"
    "[rule head]\n"                   /* line 9 */
    "region = *.fc.*, cls?.[ab]*\n"
    "route = fp32\n"
    "ef = off\n"
    "\n"
    "[rule sub]\n"                    /* line 14 */
    "comm = sub_*\n"
    "comm_size = -8, 16, 32-\n"
    "route = pmpi\n"
    "\n"
    "[rule backbone]\n"               /* line 19 */
    "datatype = MPI_FLOAT\n"
    "op = sum\n"
    "bytes = 1M-\n"
    "comm_size = 2-64\n"
    "route = binary\n"
    "ef = on\n"
    "segment = region\n"
    "\n"
    "[rule mid]\n"                    /* line 28 */
    "datatype = float, double\n"
    "bytes = 4KiB - 1MB\n"
    "route = ternary\n"
    "gamma = 0.7\n"
    "\n"
    "[default]\n"                     /* line 34 */
    "route = fp32\n";

typedef struct match_case {
    const char *region, *comm;
    int size;
    nf_dtype_t dt;
    nf_opkind_t op;
    uint64_t bytes, call;
    const char *rule;
    nf_route_t route;
    int line;
} match_case_t;

#define MiB (UINT64_C(1) << 20)
static const match_case_t match_cases[] = {
    /* warm-up: the first 5 calls of a communicator are fp32, whatever else */
    {"x.fc.w", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 0, "warmup", NF_ROUTE_FP32, 5},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 4, "warmup", NF_ROUTE_FP32, 5},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 5, "backbone", NF_ROUTE_BINARY, 19},
    /* first match wins: the head glob beats the backbone */
    {"net.fc.weight", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "head", NF_ROUTE_FP32, 9},
    {"cls1.bias", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "head", NF_ROUTE_FP32, 9},
    {"cls1.cias", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {"cls12.bias", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {"net.fc", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    /* communicator glob and size list */
    {NULL, "sub_rows", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "sub", NF_ROUTE_PMPI, 14},
    {NULL, "sub_rows", 12, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {NULL, "sub_rows", 16, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "sub", NF_ROUTE_PMPI, 14},
    {NULL, "sub_rows", 1000, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "sub", NF_ROUTE_PMPI, 14},
    {NULL, NULL, 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    /* size ranges are inclusive, K/M binary */
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, MiB - 1, 9, "mid", NF_ROUTE_TERNARY, 28},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4096, 9, "mid", NF_ROUTE_TERNARY, 28},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4095, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 65, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    /* datatype and op lists (the rule says MPI_FLOAT: any case and prefix) */
    {NULL, "w", 8, NF_DT_DOUBLE, NF_OP_MAX, 8192, 9, "mid", NF_ROUTE_TERNARY, 28},
    {NULL, "w", 8, NF_DT_DOUBLE, NF_OP_SUM, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_USER, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, NF_DT_INT, NF_OP_SUM, 8192, 9, "default", NF_ROUTE_FP32, 34},
    /* not known (out of the enums): matches no datatype or op condition */
    {NULL, "w", 8, NF_DT_N, NF_OP_N, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, NF_DT_FLOAT, (nf_opkind_t)1000, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, (nf_dtype_t)-1, NF_OP_SUM, 8192, 9, "default", NF_ROUTE_FP32, 34},
};

START_TEST(test_match)
{
    const match_case_t *c = &match_cases[_i];
    nf_policy_query_t q = {c->region, c->comm, c->size, c->dt, c->op, c->bytes, c->call};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "fixture should be clean: %s", g.text);
    nf_policy_match(p, &q, &a);
    ck_assert_msg(strcmp(a.rule, c->rule) == 0, "case %d: rule %s, expected %s", _i, a.rule, c->rule);
    ck_assert_int_eq(a.route, c->route);
    ck_assert_int_eq(a.line, c->line);
    ck_assert_str_eq(a.file, "t.policy");
    nf_policy_free(p);
}
END_TEST

START_TEST(test_actions)
{
    static const char no_default[] = HDR "[rule a]\ncalls = 3\nroute = fp32\n";
    nf_policy_query_t q = {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    nf_policy_match(p, &q, &a);
    ck_assert_int_eq(a.ef, 1);
    ck_assert(a.gamma < 0);
    ck_assert_int_eq(a.segment, NF_POLICY_SEGMENT_REGION);
    ck_assert_int_eq(a.index, 3);
    ck_assert_uint_eq(nf_policy_fields(p), 0x7f);
    ck_assert_uint_eq(nf_policy_fields(NULL), 0);
    q.bytes = 8192;
    nf_policy_match(p, &q, &a);
    ck_assert(a.gamma == 0.7);
    ck_assert_int_eq(a.ef, -1);
    q.region = "a.fc.b";
    nf_policy_match(p, &q, &a);
    ck_assert_int_eq(a.ef, 0);
    q.region = NULL;
    q.bytes = 10;
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "default");
    ck_assert_int_eq(a.index, -1);
    nf_policy_free(p);

    /* No policy, or no [default]: the built-in pmpi. */
    nf_policy_match(NULL, &q, &a);
    ck_assert_int_eq(a.route, NF_ROUTE_PMPI);
    ck_assert_int_eq(a.line, 0);
    ck_assert_int_eq(parse(no_default, strlen(no_default), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_policy_fields(p), NF_POLICY_F_CALLS);
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "built-in");
    ck_assert_int_eq(a.route, NF_ROUTE_PMPI);
    q.call = 3;
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "a");
    nf_policy_free(p);
}
END_TEST

START_TEST(test_explain)
{
    nf_policy_query_t q = {"net.fc.w", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 7};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[2048], small[16];
    size_t n;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    n = nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_msg(strstr(buf, "rule warmup (t.policy:5): no match: calls 7 NOT in 0-4\n") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "rule head (t.policy:9): match: region 'net.fc.w' in *.fc.*, cls?.[ab]*\n"), "%s", buf);
    ck_assert_msg(strstr(buf, "=> route fp32 (ef off, ef_decay inherit, gamma inherit, segment inherit) from rule head "
                              "(t.policy:9)"),
                  "%s", buf);
    ck_assert_uint_eq(nf_policy_explain(p, &q, &a, small, sizeof(small)), n);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    q.bytes = 1;
    q.region = NULL;
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "no rule matched: [default] applies\n=> route fp32") != NULL, "%s", buf);
    nf_policy_free(p);
}
END_TEST

/* ------------------------------------------------------------ cache keys */

START_TEST(test_size_class)
{
    /* bytes cut points of match_text: mid 4096 and 1M + 1, backbone 1M */
    static const struct { uint64_t bytes; unsigned cls; } cases[] = {
        {0, 0}, {4095, 0}, {4096, 1}, {MiB - 1, 1}, {MiB, 2}, {MiB + 1, 3}, {UINT64_MAX, 3}};
    static const char no_bytes[] = HDR "[rule a]\ncalls = 3\nroute = fp32\n"
                                   "[rule b]\nbytes = 0-\nroute = fp32\n";
    static const char disabled[] = HDR "[rule a]\nbytes = 1K-2K\nroute = warp\n";
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(nf_policy_size_class(p, cases[i].bytes) == cases[i].cls, "bytes %" PRIu64 ": class %u",
                      cases[i].bytes, nf_policy_size_class(p, cases[i].bytes));
    nf_policy_free(p);
    ck_assert_uint_eq(nf_policy_size_class(NULL, 123), 0);
    ck_assert_int_eq(parse(no_bytes, strlen(no_bytes), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_policy_size_class(p, UINT64_MAX), 0);
    nf_policy_free(p);
    ck_assert_int_eq(parse(disabled, strlen(disabled), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_policy_size_class(p, 1500), 0);
    nf_policy_free(p);
}
END_TEST

typedef struct settled_case { const char *calls; uint64_t settled; } settled_case_t;

static const settled_case_t settled_cases[] = {
    {NULL, 0}, {"0-", 0}, {"0-4", 5}, {"3", 4}, {"10-", 10}, {"3, 7-9", 10}, {"3, 7-9, 20-", 20},
    {"30-, 3", 30}, {"-5", 6}, {"18446744073709551615", 18446744073709551615ull},
};

START_TEST(test_calls_settled)
{
    const settled_case_t *c = &settled_cases[_i];
    char text[256];
    nf_policy_t *p;
    diags_t g;

    /* A disabled rule's calls never count; another rule without calls neither. */
    snprintf(text, sizeof(text), HDR "[rule off]\ncalls = 0-99\nroute = warp\n[rule b]\nbytes = 1K-\n"
             "route = fp32\n%s%s%s", c->calls ? "[rule a]\ncalls = " : "", c->calls ? c->calls : "",
             c->calls ? "\nroute = binary\n" : "");
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(nf_policy_calls_settled(p) == c->settled, "calls = %s: settled %" PRIu64, c->calls,
                  nf_policy_calls_settled(p));
    nf_policy_free(p);
    ck_assert_uint_eq(nf_policy_calls_settled(NULL), 0);
}
END_TEST

/* Random policies and queries: sizes of one class, and calls past the
 * settled index, never change which rule decides. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* "lo-hi, ..." over [0, max]: sorted distinct cut points, so no overlap;
 * the last range may be open. */
static void rnd_ranges(uint64_t *s, uint64_t max, char *out, size_t len)
{
    int n = 1 + (int)(rnd(s) % 3);
    uint64_t at = 0;
    size_t used = 0;

    for (int i = 0; i < n && at <= max; i++) {
        uint64_t lo = at + rnd(s) % (max / 4 + 1), hi = lo + rnd(s) % (max / 4 + 1);
        const char *sep = i ? ", " : "";
        if (i == n - 1 && rnd(s) % 4 == 0)
            used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64 "-", sep, lo);
        else if (hi == lo)
            used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64, sep, lo);
        else
            used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64 "-%" PRIu64, sep, lo, hi);
        at = hi + 1 + rnd(s) % 8;
    }
}

static size_t rnd_rule(uint64_t *s, int i, char *out, size_t len)
{
    static const char *const dts[] = {"float", "double", "int, float"}, *const ops[] = {"sum", "max"};
    char r[128];
    size_t used = (size_t)snprintf(out, len, "[rule r%d]\nroute = %s\n", i, rnd(s) % 10 ? "fp32" : "warp");

    if (rnd(s) % 10 < 7) {
        rnd_ranges(s, 4000, r, sizeof(r));
        used += (size_t)snprintf(out + used, len - used, "bytes = %s\n", r);
    }
    if (rnd(s) % 10 < 3) {
        rnd_ranges(s, 12, r, sizeof(r));
        used += (size_t)snprintf(out + used, len - used, "calls = %s\n", r);
    }
    if (rnd(s) % 10 < 3)
        used += (size_t)snprintf(out + used, len - used, "datatype = %s\n", dts[rnd(s) % 3]);
    if (rnd(s) % 10 < 3)
        used += (size_t)snprintf(out + used, len - used, "op = %s\n", ops[rnd(s) % 2]);
    if (rnd(s) % 10 < 2)
        used += (size_t)snprintf(out + used, len - used, "comm_size = 2-%d\n", 2 + (int)(rnd(s) % 6));
    return used;
}

static void rnd_query(uint64_t *s, nf_policy_query_t *q)
{
    static const nf_dtype_t dts[] = {NF_DT_FLOAT, NF_DT_DOUBLE, NF_DT_INT};

    q->region = NULL;
    q->comm_name = "w";
    q->comm_size = 1 + (int)(rnd(s) % 9);
    q->datatype = dts[rnd(s) % 3];
    q->op = rnd(s) % 2 ? NF_OP_SUM : NF_OP_MAX;
    q->bytes = rnd(s) % 5000;
    q->call = rnd(s) % 40;
}

static int decider(const nf_policy_t *p, const nf_policy_query_t *q)
{
    nf_policy_action_t a;

    nf_policy_match(p, q, &a);
    return a.index;
}

START_TEST(test_cache_keys_random)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(_i + 1), same = 0;
    char text[8192];
    size_t used = (size_t)snprintf(text, sizeof(text), HDR);
    int nrules = 1 + (int)(rnd(&seed) % 8);
    nf_policy_t *p;
    diags_t g;

    for (int i = 0; i < nrules; i++)
        used += rnd_rule(&seed, i, text + used, sizeof(text) - used);
    ck_assert_msg(parse(text, used, &g, &p) == NF_OK, "%s\n%s", text, g.text);
    for (int n = 0; n < 4000; n++) {
        nf_policy_query_t q, q2;
        rnd_query(&seed, &q);
        q2 = q;
        q2.bytes = rnd(&seed) % 5000;
        if (nf_policy_size_class(p, q.bytes) == nf_policy_size_class(p, q2.bytes)) {
            same++;
            ck_assert_msg(decider(p, &q) == decider(p, &q2), "bytes %" PRIu64 " and %" PRIu64
                          " share class %u but not the rule in:\n%s", q.bytes, q2.bytes,
                          nf_policy_size_class(p, q.bytes), text);
        }
        q2 = q;
        q2.call = nf_policy_calls_settled(p) + rnd(&seed) % 50;
        q.call = nf_policy_calls_settled(p);
        ck_assert_msg(decider(p, &q) == decider(p, &q2), "calls %" PRIu64 " and %" PRIu64
                      " past settled decide differently in:\n%s", q.call, q2.call, text);
    }
    ck_assert_uint_gt(same, 0);
    nf_policy_free(p);
}
END_TEST

/* A class boundary is real: just below and at each bound differ in class. */
START_TEST(test_size_class_bounds)
{
    static const char text[] = HDR "[rule a]\nbytes = 10-19, 40\nroute = fp32\n[rule b]\nbytes = -15, 30-\n"
                               "route = binary\n";
    static const uint64_t bounds[] = {10, 16, 20, 30, 40, 41};
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        ck_assert_uint_eq(nf_policy_size_class(p, bounds[i]), i + 1);
        ck_assert_uint_eq(nf_policy_size_class(p, bounds[i] - 1), i);
        /* the smallest size of each class: admission tries each class */
        ck_assert_uint_eq(nf_policy_size_class_low(p, (unsigned)i + 1), bounds[i]);
    }
    ck_assert_uint_eq(nf_policy_size_class_low(p, 0), 0);
    ck_assert_uint_eq(nf_policy_size_class_low(p, 7), 0); /* past the last class */
    ck_assert_uint_eq(nf_policy_size_class_low(NULL, 1), 0);
    nf_policy_free(p);
}
END_TEST

/* ------------------------------------------------------------ hash */

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Texts that must hash as base does, and texts that must not. */
static void check_hashes(uint64_t (*hash)(const char *), const char *base, const char *const *same,
                         size_t nsame, const char *const *differ, size_t ndiffer)
{
    uint64_t h = hash(base);

    ck_assert(h != 0);
    for (size_t i = 0; i < nsame; i++)
        ck_assert_msg(hash(same[i]) == h, "same[%zu] hashes differently", i);
    for (size_t i = 0; i < ndiffer; i++)
        ck_assert_msg(hash(differ[i]) != h, "differ[%zu] hashes the same", i);
}

static uint64_t hash_of(const char *text)
{
    nf_policy_t *p;
    diags_t g;
    uint64_t h;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    h = nf_policy_hash(p);
    nf_policy_free(p);
    return h;
}

START_TEST(test_hash)
{
    static const char base[] = HDR "[rule a]\nbytes = 1M-\nroute = binary\n[default]\nroute = fp32\n";
    static const char *const same[] = {
        /* comments, spacing, key order, units, settings: same decisions */
        "# c\n[policy]\n  version=1\nstats = 1\n\n[rule a] ; x\nroute = binary ; y\nbytes = 1048576 -\n"
        "[default]\nroute=fp32\n",
        HDR "cxl_node = 3\n[rule a]\nbytes = 1MiB-\nROUTE = Binary\n[default]\nroute = fp32\n",
        "\xEF\xBB\xBF[policy]\r\nversion = 1\r\n[Rule a]\r\nbytes = 1M-\r\nroute = binary\r\n"
        "[DEFAULT]\r\nroute = fp32\r\n",
    };
    static const char *const differ[] = {
        HDR "[rule a]\nbytes = 1M-\nroute = ternary\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 2M-\nroute = binary\n[default]\nroute = fp32\n",
        HDR "[rule b]\nbytes = 1M-\nroute = binary\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\n[default]\nroute = pmpi\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\nef = off\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\ngamma = 0\n[default]\nroute = fp32\n",
        HDR2 "[rule a]\nbytes = 1M-\nroute = binary\nef_decay = 1\n[default]\nroute = fp32\n",
        HDR2 "[rule a]\nbytes = 1M-\nroute = binary\n[default]\nroute = fp32\nef_decay = 0.5\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\n[rule z]\nroute = binary\nfoo = 1\n[rule y]\nroute = fp32\n"
        "[default]\nroute = fp32\n",
    };
    uint64_t h = hash_of(base);

    ck_assert(h != 0);
    ck_assert(nf_policy_hash(NULL) == 0);
    ck_assert(hash_of(base) == h);
    check_hashes(hash_of, base, same, NELEM(same), differ, NELEM(differ));
}
END_TEST

/* route = auto: the action says so, with fp32 for what the profile lacks. */
typedef struct auto_case {
    const char *text;
    int warnings;          /* route = auto without a profile */
    nf_route_t route;
    int route_auto;
    const char *rule;
} auto_case_t;

static const auto_case_t auto_cases[] = {
    {HDR "[rule a]\nroute = auto\n", 1, NF_ROUTE_FP32, 1, "a"},
    {HDR "profile = m.profile\n[rule a]\nroute = AUTO\n", 0, NF_ROUTE_FP32, 1, "a"},
    {"[rule a]\nroute = auto\n" HDR "profile = m.profile\n", 0, NF_ROUTE_FP32, 1, "a"},
    {HDR "profile = m.profile\n[rule a]\nroute = fp32\n", 0, NF_ROUTE_FP32, 0, "a"},
    {HDR "[rule a]\nroute = binary\n", 0, NF_ROUTE_BINARY, 0, "a"},
    {HDR "[default]\nroute = auto\n", 1, NF_ROUTE_FP32, 1, "default"},
    {HDR "profile = m.profile\n[default]\nroute = auto\n", 0, NF_ROUTE_FP32, 1, "default"},
    /* gamma may apply: auto can pick ternary */
    {HDR "profile = m.profile\n[rule a]\nroute = auto\ngamma = 0.7\n", 0, NF_ROUTE_FP32, 1, "a"},
    /* a dropped rule says nothing about auto; [default] decides */
    {HDR "[rule a]\nroute = auto\nef = maybe\n[default]\nroute = pmpi\n", 0, NF_ROUTE_PMPI, 0, "default"},
};

START_TEST(test_route_auto)
{
    const auto_case_t *c = &auto_cases[_i];
    nf_policy_query_t q = {NULL, "w", 4, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(c->text, strlen(c->text), &g, &p), NF_OK);
    ck_assert_msg(g.count[NF_POLICY_WARNING] == c->warnings, "case %d: %s", _i, g.text);
    ck_assert_msg((strstr(g.text, "route = auto without a profile") != NULL) == (c->warnings > 0), "case %d: %s",
                  _i, g.text);
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, c->rule);
    ck_assert_int_eq(a.route, c->route);
    ck_assert_int_eq(a.route_auto, c->route_auto);
    nf_policy_free(p);
}
END_TEST

START_TEST(test_route_auto_explain_hash)
{
    static const char text[] = HDR "profile = m.profile\n[rule a]\nroute = auto\nef = on\n";
    nf_policy_query_t q = {NULL, "w", 4, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[1024];

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route auto (ef on, ef_decay inherit, gamma inherit, segment inherit) from rule a "
                              "(t.policy:4)\n"
                              "   auto: each segment takes the profile's route; fp32 where the profile has none\n"),
                  "%s", buf);
    nf_policy_free(p);
    nf_policy_match(NULL, &q, &a);
    ck_assert_int_eq(a.route_auto, 0);
    ck_assert(hash_of(HDR "[rule a]\nroute = auto\n") != hash_of(HDR "[rule a]\nroute = fp32\n"));
    ck_assert(hash_of(HDR "[default]\nroute = auto\n") != hash_of(HDR "[default]\nroute = fp32\n"));
    ck_assert(hash_of(HDR "[rule a]\nroute = auto\n") == hash_of(HDR "profile = x\n[rule a]\nroute = Auto\n"));
}
END_TEST

/* scale_block (version 3): 0 or a multiple of 512, in the action, in
 * explain (only when set) and in the hash (only when set: older hashes
 * stand); absent is inherit (< 0); auto may pick binary: no warning. */
START_TEST(test_scale_block)
{
    static const char text[] = HDR3 "profile = m.profile\n"
                               "[rule b]\ncomm = b\nroute = binary\nscale_block = 512\n"
                               "[rule z]\ncomm = z\nroute = binary\nscale_block = 0\n"
                               "[rule big]\ncomm = g\nroute = auto\nscale_block = 1048576\n"
                               "[rule none]\ncomm = n\nroute = binary\n"
                               "[default]\nroute = binary\nscale_block = 2048\n";
    static const struct { const char *comm, *rule; long block; } want[] = {
        {"b", "b", 512}, {"z", "z", 0}, {"g", "big", 1048576}, {"n", "none", -1}, {"x", "default", 2048},
    };
    nf_policy_query_t q = {NULL, NULL, 2, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[2048];

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "should be clean, got %s", g.text);
    for (size_t i = 0; i < NELEM(want); i++) {
        q.comm_name = want[i].comm;
        nf_policy_match(p, &q, &a);
        ck_assert_str_eq(a.rule, want[i].rule);
        ck_assert_msg(a.scale_block == want[i].block, "%s: scale_block %ld", a.rule, a.scale_block);
    }
    q.comm_name = "b";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route binary (ef inherit, ef_decay inherit, gamma inherit, segment inherit, "
                              "scale_block 512) from rule b (t.policy:4)\n"), "%s", buf);
    q.comm_name = "n";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "segment inherit) from rule none"), "%s", buf);
    nf_policy_free(p);
    nf_policy_match(NULL, &q, &a);
    ck_assert(a.scale_block < 0);
    ck_assert(hash_of(HDR3 "[rule a]\nroute = binary\nscale_block = 512\n") !=
              hash_of(HDR3 "[rule a]\nroute = binary\nscale_block = 1024\n"));
    ck_assert(hash_of(HDR3 "[rule a]\nroute = binary\nscale_block = 0\n") !=
              hash_of(HDR "[rule a]\nroute = binary\n"));
    ck_assert(hash_of(HDR "[rule a]\nroute = binary\n") == hash_of(HDR3 "[rule a]\nroute = binary\n"));
}
END_TEST

/* block (version 4): the integer routes' scale block, a power of two from
 * 32 to 4096, in the action (0 when absent or built in: the default, 128),
 * in explain and in the hash only when set (older hashes stand). The rule
 * that matches gives it, else [default]'s; a rule without the key has the
 * default, not [default]'s. auto may pick an integer route: no warning. */
START_TEST(test_block)
{
    static const char text[] = HDR4 "profile = m.profile\n"
                               "[rule lo]\ncomm = lo\nroute = int4\nblock = 32\n"
                               "[rule mid]\ncomm = mid\nroute = int3\nblock = 128\n"
                               "[rule hi]\ncomm = hi\nroute = INT2\nblock = 4096\n"
                               "[rule auto]\ncomm = a\nroute = auto\nblock = 256\n"
                               "[rule none]\ncomm = n\nroute = int4\n"
                               "[default]\nroute = int4\nblock = 64\n";
    static const struct { const char *comm, *rule; nf_route_t route; long block; } want[] = {
        {"lo", "lo", NF_ROUTE_INT4, 32},     {"mid", "mid", NF_ROUTE_INT3, 128},
        {"hi", "hi", NF_ROUTE_INT2, 4096},   {"a", "auto", NF_ROUTE_FP32, 256},
        {"n", "none", NF_ROUTE_INT4, 0},     {"x", "default", NF_ROUTE_INT4, 64},
    };
    nf_policy_query_t q = {NULL, NULL, 2, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[2048];

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "should be clean, got %s", g.text);
    ck_assert_int_eq(nf_policy_disabled_count(p), 0);
    for (size_t i = 0; i < NELEM(want); i++) {
        q.comm_name = want[i].comm;
        nf_policy_match(p, &q, &a);
        ck_assert_str_eq(a.rule, want[i].rule);
        ck_assert_msg(a.route == want[i].route && a.block == want[i].block, "%s: route %s, block %ld", a.rule,
                      nf_route_name(a.route), a.block);
    }
    q.comm_name = "lo";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route int4 (ef inherit, ef_decay inherit, gamma inherit, segment inherit, "
                              "block 32) from rule lo (t.policy:4)\n"), "%s", buf);
    q.comm_name = "x";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route int4 (ef inherit, ef_decay inherit, gamma inherit, segment inherit, "
                              "block 64) from [default] (t.policy:23)\n"), "%s", buf);
    q.comm_name = "n";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route int4 (ef inherit, ef_decay inherit, gamma inherit, segment inherit) "
                              "from rule none"), "%s", buf);
    nf_policy_free(p);
    nf_policy_match(NULL, &q, &a);
    ck_assert_int_eq(a.block, 0);

    /* the scale block a segment runs with: the rule's, else the default */
    nf_settings_t st = {.ef = 1, .ef_decay = 1.0};
    nf_decide_reason_t why = {NF_WHY_RULE, NULL, 0};
    nf_decide_params_t pa;
    nf_policy_action_t act = {.route = NF_ROUTE_INT4, .ef = -1, .ef_decay = -1.0, .gamma = -1.0,
                              .scale_block = -1, .block = 0, .rule = "r", .file = "t.policy", .line = 3};
    nf_decide_params(&act, &why, NF_ROUTE_INT4, &st, &pa);
    ck_assert_msg(pa.block == 128 && strcmp(pa.int_block_by, "default") == 0, "no block: %ld by %s",
                  pa.block, pa.int_block_by);
    ck_assert_msg(pa.ef_decay == 1.0 && strcmp(pa.decay_by, "settings") == 0 && pa.scale_block == -1,
                  "int4 keeps a residual, has no scale_block: %g by %s, %ld", pa.ef_decay, pa.decay_by,
                  pa.scale_block);
    act.block = 256;
    nf_decide_params(&act, &why, NF_ROUTE_INT2, &st, &pa);
    ck_assert_msg(pa.block == 256 && strcmp(pa.int_block_by, "rule") == 0, "rule's block: %ld by %s",
                  pa.block, pa.int_block_by);
    nf_decide_params(&act, &why, NF_ROUTE_BINARY, &st, &pa);
    ck_assert(pa.block == -1 && pa.int_block_by == NULL);
    nf_decide_params(&act, &why, NF_ROUTE_FP32, &st, &pa);
    ck_assert(pa.block == -1 && pa.int_block_by == NULL);
    /* a calibration run: what its integer shadows ran */
    nf_decide_reason_t cal = {NF_WHY_CALIBRATE, NULL, 0};
    nf_decide_params(&act, &cal, NF_ROUTE_FP32, &st, &pa);
    ck_assert_msg(pa.block == 256 && strcmp(pa.int_block_by, "rule") == 0, "calibrate: %ld", pa.block);
    act.block = 0;
    nf_decide_params(&act, &cal, NF_ROUTE_FP32, &st, &pa);
    ck_assert_msg(pa.block == 128 && strcmp(pa.int_block_by, "default") == 0, "calibrate: %ld", pa.block);

    /* the hash: every value its own, set against unset, older hashes stand */
    ck_assert(hash_of(HDR4 "[rule a]\nroute = int4\nblock = 64\n") !=
              hash_of(HDR4 "[rule a]\nroute = int4\nblock = 128\n"));
    ck_assert(hash_of(HDR4 "[rule a]\nroute = int4\nblock = 128\n") !=
              hash_of(HDR4 "[rule a]\nroute = int4\n"));
    ck_assert(hash_of(HDR4 "[rule a]\nroute = int4\n[default]\nroute = int4\nblock = 32\n") !=
              hash_of(HDR4 "[rule a]\nroute = int4\n[default]\nroute = int4\nblock = 4096\n"));
    ck_assert(hash_of(HDR4 "[rule a]\nroute = int4\nblock = 0128\n") ==
              hash_of(HDR4 "[rule a]\nblock = 128\nroute = int4\n"));
    ck_assert(hash_of(HDR "[rule a]\nroute = binary\n") == hash_of(HDR4 "[rule a]\nroute = binary\n"));
}
END_TEST

/* route = int4 | int3 | int2 (version 4): each its nf_route_t, in any case,
 * in a rule and in [default], each with its own hash. */
START_TEST(test_int_routes)
{
    static const struct { const char *name; nf_route_t route; } want[] = {
        {"int4", NF_ROUTE_INT4}, {"int3", NF_ROUTE_INT3}, {"INT2", NF_ROUTE_INT2},
    };
    nf_policy_query_t q = {NULL, "w", 2, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    uint64_t h[NELEM(want)];

    for (size_t i = 0; i < NELEM(want); i++) {
        char text[256];
        nf_policy_action_t a;
        nf_policy_t *p;
        diags_t g;

        snprintf(text, sizeof(text), HDR4 "[rule r]\ncomm = w\nroute = %s\n[default]\nroute = %s\n",
                 want[i].name, want[i].name);
        ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
        ck_assert_msg(g.text[0] == '\0', "%s: should be clean, got %s", want[i].name, g.text);
        q.comm_name = "w";
        nf_policy_match(p, &q, &a);
        ck_assert_msg(strcmp(a.rule, "r") == 0 && a.route == want[i].route && !a.route_auto && a.block == 0,
                      "%s: rule %s, route %d", want[i].name, a.rule, a.route);
        q.comm_name = "other";
        nf_policy_match(p, &q, &a);
        ck_assert_msg(strcmp(a.rule, "default") == 0 && a.route == want[i].route, "%s: [default] route %d",
                      want[i].name, a.route);
        h[i] = nf_policy_hash(p);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(h[i] != h[j], "%s and %s hash alike", want[i].name, want[j].name);
        nf_policy_free(p);
    }
}
END_TEST

/* ef_decay (version 2): any number from 0 to 1 as written (0 and 1
 * included), in the action, in explain and in the hash; absent is inherit
 * (< 0). */
START_TEST(test_ef_decay)
{
    static const char text[] = HDR2 "profile = m.profile\n"
                               "[rule half]\ncomm = h\nroute = binary\nef_decay = 0.5\n"
                               "[rule zero]\ncomm = z\nroute = ternary\nef_decay = 0\n"
                               "[rule one]\ncomm = o\nroute = binary\nef_decay = 1.0\n"
                               "[rule small]\ncomm = s\nroute = auto\nef_decay = 2.5e-1\n"
                               "[rule none]\ncomm = n\nroute = binary\n"
                               "[default]\nroute = ternary\nef_decay = 0.3\n";
    static const struct { const char *comm, *rule; double decay; } want[] = {
        {"h", "half", 0.5}, {"z", "zero", 0.0}, {"o", "one", 1.0}, {"s", "small", 0.25},
        {"n", "none", -1.0}, {"x", "default", 0.3},
    };
    nf_policy_query_t q = {NULL, NULL, 2, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[2048];

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "should be clean (auto may pick binary), got %s", g.text);
    for (size_t i = 0; i < NELEM(want); i++) {
        q.comm_name = want[i].comm;
        nf_policy_match(p, &q, &a);
        ck_assert_str_eq(a.rule, want[i].rule);
        ck_assert_msg(a.ef_decay == want[i].decay, "%s: ef_decay %g", a.rule, a.ef_decay);
    }
    q.comm_name = "h";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route binary (ef inherit, ef_decay 0.5, gamma inherit, segment inherit) "
                              "from rule half (t.policy:4)\n"), "%s", buf);
    q.comm_name = "x";
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route ternary (ef inherit, ef_decay 0.3, gamma inherit, segment inherit) "
                              "from [default] (t.policy:23)\n"), "%s", buf);
    nf_policy_free(p);
    nf_policy_match(NULL, &q, &a);
    ck_assert(a.ef_decay < 0);
    /* every value its own hash; spellings of one value, one hash */
    ck_assert(hash_of(HDR2 "[rule a]\nroute = binary\nef_decay = 0.5\n") !=
              hash_of(HDR2 "[rule a]\nroute = binary\nef_decay = 0.25\n"));
    ck_assert(hash_of(HDR2 "[rule a]\nroute = binary\nef_decay = 0\n") !=
              hash_of(HDR "[rule a]\nroute = binary\n"));
    ck_assert(hash_of(HDR2 "[rule a]\nroute = binary\nef_decay = 0.5\n") ==
              hash_of(HDR2 "[rule a]\nef_decay = 5e-1\nroute = binary\n"));
    /* the version a file says decides nothing: version 1 hashes stand */
    ck_assert(hash_of(HDR "[rule a]\nroute = binary\n") == hash_of(HDR2 "[rule a]\nroute = binary\n"));
}
END_TEST

/* warmup (version 3): in the action (0 when absent or built in), in
 * explain only when set, and in the hash only when set. */
START_TEST(test_warmup)
{
    static const char text[] = HDR3 "[rule w]\ncomm = w\nroute = binary\nwarmup = 140\n"
                               "[rule none]\ncomm = n\nroute = binary\n"
                               "[default]\nroute = ternary\nwarmup = 0\n";
    nf_policy_query_t q = {NULL, "w", 2, NF_DT_FLOAT, NF_OP_SUM, 4096, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[2048];

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "should be clean, got %s", g.text);
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "w");
    ck_assert_uint_eq(a.warmup, 140);
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "=> route binary (ef inherit, ef_decay inherit, gamma inherit, segment "
                              "inherit, warmup 140) from rule w (t.policy:3)\n"), "%s", buf);
    q.comm_name = "n";
    nf_policy_match(p, &q, &a);
    ck_assert_uint_eq(a.warmup, 0);
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "segment inherit) from rule none"), "%s", buf);
    nf_policy_free(p);
    nf_policy_match(NULL, &q, &a);
    ck_assert_uint_eq(a.warmup, 0);
    ck_assert(hash_of(HDR3 "[rule a]\nroute = binary\nwarmup = 10\n") !=
              hash_of(HDR3 "[rule a]\nroute = binary\nwarmup = 11\n"));
    ck_assert(hash_of(HDR3 "[rule a]\nroute = binary\nwarmup = 0\n") ==
              hash_of(HDR "[rule a]\nroute = binary\n"));
    /* a warm-up on a route without one is a warning, nothing dropped */
    static const char fp[] = HDR3 "[rule a]\nroute = fp32\nwarmup = 5\n";
    ck_assert_int_eq(parse(fp, strlen(fp), &g, &p), NF_OK);
    nf_policy_free(p);
}
END_TEST

/* Settings parse; numbers do not depend on the program's locale. */
START_TEST(test_settings)
{
    static const char text[] = "[policy]\nversion = 1\ncxl_node = auto\ntrace = /tmp/t.jsonl\nstats = out.json\n"
                               "[rule a]\nroute = ternary\ngamma = 1.25e0\n";
    nf_policy_query_t q = {NULL, "w", 2, NF_DT_FLOAT, NF_OP_SUM, 4, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    uint64_t v;

    setlocale(LC_NUMERIC, "de_DE.UTF-8"); /* where installed: a decimal comma must not matter */
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_int_eq(nf_policy_cxl_node(p), -1);
    ck_assert_str_eq(nf_policy_trace(p), "/tmp/t.jsonl");
    ck_assert_str_eq(nf_policy_stats(p), "out.json");
    nf_policy_match(p, &q, &a);
    ck_assert(a.gamma == 1.25);
    nf_policy_free(p);
    ck_assert_int_eq(nf_policy_parse_size("64K", &v), NF_OK);
    ck_assert_uint_eq(v, 65536);
    ck_assert_int_eq(nf_policy_parse_size("2GiB", &v), NF_OK);
    ck_assert_uint_eq(v, UINT64_C(2) << 30);
    ck_assert_int_eq(nf_policy_parse_size("1 K", &v), NF_ERR_INVALID);
    ck_assert_int_eq(nf_policy_parse_size("-1", &v), NF_ERR_INVALID);
}
END_TEST

/* ------------------------------------------------- model-aware settings */

/* Unset, and a NULL policy: no paths, the documented defaults. */
START_TEST(test_model_defaults)
{
    static const char text[] = HDR "[default]\nroute = fp32\n";
    nf_policy_t *p;
    diags_t g;

    ck_assert_ptr_null(nf_policy_regions(NULL));
    ck_assert_ptr_null(nf_policy_calibrate(NULL));
    ck_assert_ptr_null(nf_policy_profile(NULL));
    ck_assert_uint_eq(nf_policy_calibrate_calls(NULL), 20);
    ck_assert(nf_policy_admit_cosine(NULL) == 0.5);
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_ptr_null(nf_policy_regions(p));
    ck_assert_ptr_null(nf_policy_calibrate(p));
    ck_assert_ptr_null(nf_policy_profile(p));
    ck_assert_uint_eq(nf_policy_calibrate_calls(p), NF_POLICY_CALIBRATE_CALLS);
    ck_assert(nf_policy_admit_cosine(p) == NF_POLICY_ADMIT_COSINE);
    nf_policy_free(p);
}
END_TEST

/* A bad value is ignored: the default stays, or the earlier good value. */
START_TEST(test_model_values)
{
    static const char text[] = HDR "calibrate_calls = 7\nadmit_cosine = -0.25\nadmit_cosine = 2\n"
                               "calibrate_calls = 0\n[default]\nroute = fp32\n";
    static const char edges[] = HDR "calibrate_calls = 4294967295\nadmit_cosine = 1\n";
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_int_eq(g.count[NF_POLICY_DISABLED], 2);
    ck_assert_msg(strstr(g.text, "t.policy:5: bad admit_cosine '2'") != NULL, "%s", g.text);
    ck_assert_msg(strstr(g.text, "t.policy:6: bad calibrate_calls '0'") != NULL, "%s", g.text);
    ck_assert_uint_eq(nf_policy_calibrate_calls(p), 7);
    ck_assert(nf_policy_admit_cosine(p) == -0.25);
    nf_policy_free(p);
    ck_assert_int_eq(parse(edges, strlen(edges), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "%s", g.text);
    ck_assert_uint_eq(nf_policy_calibrate_calls(p), 4294967295u);
    ck_assert(nf_policy_admit_cosine(p) == 1.0);
    nf_policy_free(p);
}
END_TEST

/* health and its numbers: defaults, values, and the hash tells them apart. */
START_TEST(test_health_keys)
{
    static const char text[] = HDR "health = on\ncooldown = 3\ncooldown_max = 12\nloss_spike = 1.5\n"
                               "loss_window = 4\nef_growth = 2.5\n[default]\nroute = binary\n";
    static const char plain[] = HDR "[default]\nroute = binary\n";
    nf_policy_t *p, *q;
    diags_t g;

    const nf_policy_health_t *d = nf_policy_health(NULL);
    ck_assert(!d->on && d->cooldown == 50 && d->cooldown_max == 800 && d->loss_spike == 2.0 &&
              d->loss_window == 20 && d->ef_growth == 4.0);
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "%s", g.text);
    const nf_policy_health_t *h = nf_policy_health(p);
    ck_assert(h->on && h->cooldown == 3 && h->cooldown_max == 12 && h->loss_spike == 1.5 &&
              h->loss_window == 4 && h->ef_growth == 2.5);
    ck_assert_int_eq(parse(plain, strlen(plain), &g, &q), NF_OK);
    ck_assert(!nf_policy_health(q)->on);
    ck_assert(nf_policy_hash(p) != nf_policy_hash(q));
    nf_policy_free(p);
    nf_policy_free(q);
}
END_TEST

/* Relative paths are taken from the policy file's directory. */
typedef struct path_case { const char *policy, *value, *expect; } path_case_t;

static const path_case_t path_cases[] = {
    {"/etc/nfcoll/train.policy", "model.layout", "/etc/nfcoll/model.layout"},
    {"/etc/nfcoll/train.policy", "sub/dir/x", "/etc/nfcoll/sub/dir/x"},
    {"/etc/nfcoll/train.policy", "../p", "/etc/nfcoll/../p"},
    {"/etc/nfcoll/train.policy", "/abs/path.profile", "/abs/path.profile"},
    {"/train.policy", "x", "/x"},
    {"conf/train.policy", "x.layout", "conf/x.layout"},
    {"./train.policy", "x.layout", "./x.layout"},
    {"train.policy", "x.layout", "x.layout"},
    {"train.policy", "/x.layout", "/x.layout"},
};

START_TEST(test_model_paths)
{
    const path_case_t *c = &path_cases[_i];
    char text[256];
    nf_policy_t *p = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    snprintf(text, sizeof(text), HDR "regions = %s\ncalibrate = %s\nprofile = %s\n", c->value, c->value,
             c->value);
    ck_assert_int_eq(nf_policy_parse(text, strlen(text), c->policy, collect, &g, &p), NF_OK);
    ck_assert_str_eq(nf_policy_regions(p), c->expect);
    ck_assert_str_eq(nf_policy_calibrate(p), c->expect);
    ck_assert_str_eq(nf_policy_profile(p), c->expect);
    nf_policy_free(p);
}
END_TEST

/* The same through nf_policy_load: the fixture's paths land next to it. */
START_TEST(test_model_paths_load)
{
    char expect[1024];
    nf_policy_t *p = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("model.policy"), collect, &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "model.policy should be clean, got %s", g.text);
    snprintf(expect, sizeof(expect), "%s/model.layout", NF_POLICY_FIXTURES);
    ck_assert_str_eq(nf_policy_regions(p), expect);
    snprintf(expect, sizeof(expect), "%s/model.profile", NF_POLICY_FIXTURES);
    ck_assert_str_eq(nf_policy_profile(p), expect);
    snprintf(expect, sizeof(expect), "%s/calibrated/model.profile", NF_POLICY_FIXTURES);
    ck_assert_str_eq(nf_policy_calibrate(p), expect);
    ck_assert_uint_eq(nf_policy_calibrate_calls(p), 10);
    ck_assert(nf_policy_admit_cosine(p) == 0.8);
    nf_policy_free(p);
}
END_TEST

/* calibrate_calls and admit_cosine change behaviour: they enter the hash.
 * The paths do not (the caller hashes what they name); nor do defaults
 * written out. */
START_TEST(test_model_hash)
{
    static const char base[] = HDR "[default]\nroute = fp32\n";
    static const char *const same[] = {
        HDR "regions = a.layout\nprofile = a.profile\ncalibrate = b.profile\n[default]\nroute = fp32\n",
        HDR "calibrate_calls = 20\nadmit_cosine = 0.50\n[default]\nroute = fp32\n",
        HDR "admit_cosine = 5e-1\ncalibrate_calls = 0\n[default]\nroute = fp32\n",
    };
    static const char *const differ[] = {
        HDR "calibrate_calls = 21\n[default]\nroute = fp32\n",
        HDR "admit_cosine = 0.6\n[default]\nroute = fp32\n",
        HDR "admit_cosine = -0.5\n[default]\nroute = fp32\n",
    };
    check_hashes(hash_of, base, same, NELEM(same), differ, NELEM(differ));
    ck_assert(hash_of(HDR "admit_cosine = 0\n") == hash_of(HDR "admit_cosine = -0.0\n"));
}
END_TEST

/* Rules name datatypes and ops as nf_types.h parses them: any case, with or
 * without MPI_, aliases included; queries carry the enums. */
typedef struct name_case { const char *dt, *op; nf_dtype_t qdt; nf_opkind_t qop; int hit; } name_case_t;

static const name_case_t name_cases[] = {
    {"MPI_LONG_LONG_INT", "MPI_BXOR", NF_DT_LONG_LONG, NF_OP_BXOR, 1},
    {"long_long", "bxor", NF_DT_LONG_LONG, NF_OP_BXOR, 1},
    {"Mpi_Real4", "Sum", NF_DT_REAL, NF_OP_SUM, 1},
    {"c_complex, float", "no_op", NF_DT_C_FLOAT_COMPLEX, NF_OP_NO_OP, 1},
    {"bool", "user", NF_DT_C_BOOL, NF_OP_USER, 1},
    {"derived, other", "max", NF_DT_OTHER, NF_OP_MAX, 1},
    {"long_long", "bxor", NF_DT_LONG, NF_OP_BXOR, 0},
    {"float", "sum, max", NF_DT_FLOAT, NF_OP_MIN, 0},
};

START_TEST(test_names)
{
    const name_case_t *c = &name_cases[_i];
    nf_policy_query_t q = {NULL, "w", 2, c->qdt, c->qop, 4, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char text[256];

    snprintf(text, sizeof(text), HDR "[rule a]\ndatatype = %s\nop = %s\nroute = fp32\n", c->dt, c->op);
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.count[NF_POLICY_DISABLED] == 0, "%s", g.text);
    nf_policy_match(p, &q, &a);
    ck_assert_msg(strcmp(a.rule, c->hit ? "a" : "built-in") == 0, "case %d: rule %s", _i, a.rule);
    nf_policy_free(p);
}
END_TEST

/* ------------------------------------------------------------ layout files */

static nf_status_t layout(const char *text, size_t len, diags_t *g, nf_layout_t **l)
{
    memset(g, 0, sizeof(*g));
    *l = NULL;
    return nf_layout_parse(text, len, "t.layout", collect, g, l);
}

#define N8 "nnnnnnnn"
#define N64 N8 N8 N8 N8 N8 N8 N8 N8
#define N127 N64 N8 N8 N8 N8 N8 N8 N8 "nnnnnnn"  /* 64 + 56 + 7 */

typedef struct layout_case {
    const char *what, *text;
    size_t entries;        /* loaded */
    int dropped;           /* NF_POLICY_DISABLED diagnostics */
    const char *expect;    /* substring of the diagnostics, or NULL: none at all */
} layout_case_t;

static const layout_case_t layout_cases[] = {
    {"one entry", "4096 a 0 1024\n", 1, 0, NULL},
    {"no final newline", "4096 a 0 1024", 1, 0, NULL},
    {"comments and blanks", "# c\n\n   # indented\n\t\n4096 a 0 10\n", 1, 0, NULL},
    {"CRLF and tabs", "4K\tw\t0\t10\r\n4K  b  10  10\r\n", 2, 0, NULL},
    {"size suffixes", "1M big 0 262144\n64KiB x 16383 1\n", 2, 0, NULL},
    {"name of every printable", "4096 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ 0 1\n", 1, 0, NULL},
    {"name of 127 bytes", "4096 " N127 " 0 1\n", 1, 0, NULL},
    {"same name, other size", "4096 a 0 100\n8192 a 0 100\n", 2, 0, NULL},
    {"adjacent ranges", "4096 a 0 100\n4096 b 100 100\n4096 c 200 824\n", 3, 0, NULL},
    {"range to the end", "4096 a 1000 24\n", 1, 0, NULL},
    {"too few fields", "4096 a 0 1\n4096 b 0\n", 1, 1,
     "t.layout:2: expected BYTES NAME OFFSET COUNT, found 3 fields; entry dropped"},
    {"too many fields", "4096 a 0 10 # no trailing comments\n", 0, 1,
     "t.layout:1: expected BYTES NAME OFFSET COUNT, found 8 fields; entry dropped"},
    {"one field", "junk\n", 0, 1, "t.layout:1: expected BYTES NAME OFFSET COUNT, found 1 field; entry dropped"},
    {"bad BYTES", "\n40x96 a 0 1\n", 0, 1,
     "t.layout:2: bad BYTES '40x96' (expected a size such as 4096, 64K or 1M); entry dropped"},
    {"negative BYTES", "-4 a 0 1\n", 0, 1, "t.layout:1: bad BYTES '-4'"},
    {"BYTES overflow", "99999999999999999999 a 0 1\n", 0, 1, "t.layout:1: bad BYTES '99999999999999999999'"},
    {"BYTES not floats", "4098 a 0 1\n", 0, 1,
     "t.layout:1: BYTES 4098 is not a positive multiple of 4 (a whole number of floats); entry dropped"},
    {"BYTES zero", "0 a 0 1\n", 0, 1, "t.layout:1: BYTES 0 is not a positive multiple of 4"},
    {"name too long", "4096 " N127 "n 0 1\n", 0, 1, "t.layout:1: NAME too long (128 bytes; at most 127); entry dropped"},
    {"name with control byte", "4096 a\001b 0 1\n", 0, 1,
     "t.layout:1: NAME 'a?b' has byte 0x01 (expected printable ASCII, no spaces); entry dropped"},
    {"name in UTF-8", "4096 caf\xc3\xa9 0 1\n", 0, 1, "t.layout:1: NAME 'caf?" "?' has byte 0xc3"},
    {"name with DEL", "4096 a\x7f 0 1\n", 0, 1, "t.layout:1: NAME 'a?' has byte 0x7f"},
    {"bad OFFSET", "4096 a -1 1\n", 0, 1,
     "t.layout:1: bad OFFSET '-1' (expected a decimal element index); entry dropped"},
    {"OFFSET with suffix", "4096 a 1K 1\n", 0, 1, "t.layout:1: bad OFFSET '1K'"},
    {"bad COUNT", "4096 a 0 ten\n", 0, 1,
     "t.layout:1: bad COUNT 'ten' (expected a decimal number of elements, at least 1); entry dropped"},
    {"COUNT zero", "4096 a 0 0\n", 0, 1, "t.layout:1: bad COUNT '0'"},
    {"COUNT with plus", "4096 a 0 +1\n", 0, 1, "t.layout:1: bad COUNT '+1'"},
    {"past the end", "4096 a 1000 25\n", 0, 1,
     "t.layout:1: 'a' ends past the call: OFFSET 1000 + COUNT 25 is more than the 1024 floats of 4096 bytes; "
     "entry dropped"},
    {"OFFSET past the end", "4096 a 1025 1\n", 0, 1, "t.layout:1: 'a' ends past the call: OFFSET 1025"},
    {"no wrap-around", "4096 a 1 18446744073709551615\n", 0, 1, "t.layout:1: 'a' ends past the call"},
    {"overlap", "4096 a 0 100\n# b starts inside a\n4096 b 50 100\n", 1, 1,
     "t.layout:3: 'b' [50, 150) overlaps 'a' [0, 100) of line 1 in 4096-byte calls; entry dropped"},
    {"overlap after", "4096 b 100 100\n4096 a 50 60\n", 1, 1,
     "t.layout:2: 'a' [50, 110) overlaps 'b' [100, 200) of line 1 in 4096-byte calls"},
    {"overlap same start", "4096 a 10 1\n4096 b 10 1\n", 1, 1, "t.layout:2: 'b' [10, 11) overlaps 'a' [10, 11) of line 1"},
    {"overlap inside", "4096 a 0 1024\n4096 b 500 1\n", 1, 1, "t.layout:2: 'b' [500, 501) overlaps 'a' [0, 1024)"},
    {"overlap around", "4096 b 500 1\n4096 a 0 1024\n", 1, 1, "t.layout:2: 'a' [0, 1024) overlaps 'b' [500, 501)"},
    /* a dropped line holds nothing: c overlaps only the dropped b */
    {"overlap chain", "4096 a 0 100\n4096 b 50 100\n4096 c 120 10\n", 2, 1, "t.layout:2: 'b' [50, 150) overlaps 'a'"},
    {"duplicate name", "4096 a 0 10\n4096 b 10 10\n4096 a 20 10\n", 2, 1,
     "t.layout:3: NAME 'a' appears twice for 4096-byte calls (first at line 1); entry dropped"},
    {"bad line, rest loads", "4096 a 0 10\nxyz\n4096 b 10 10\n", 2, 1, "t.layout:2: expected BYTES NAME"},
    {"binary junk", "\x7f" "ELF\x02\x01\x01\x00\x00\n", 0, 1, "t.layout:1: expected BYTES NAME OFFSET COUNT"},
    {"empty file", "", 0, 0,
     "t.layout:0: no layout entries (expected lines of BYTES NAME OFFSET COUNT): no buffer gets regions"},
    {"only comments", "# nothing\n\n", 0, 0, "t.layout:0: no layout entries"},
};

START_TEST(test_layout_lines)
{
    const layout_case_t *c = &layout_cases[_i];
    size_t len = strlen(c->text);
    nf_layout_t *l;
    diags_t g;

    if (strcmp(c->what, "binary junk") == 0)
        len = 10;
    ck_assert_int_eq(layout(c->text, len, &g, &l), NF_OK);
    ck_assert_msg(nf_layout_count(l) == c->entries, "%s: %zu entries:\n%s", c->what, nf_layout_count(l), g.text);
    ck_assert_msg(g.count[NF_POLICY_DISABLED] == c->dropped, "%s: %d dropped:\n%s", c->what,
                  g.count[NF_POLICY_DISABLED], g.text);
    ck_assert_int_eq(g.count[NF_POLICY_ERROR], 0);
    if (c->expect == NULL)
        ck_assert_msg(g.text[0] == '\0', "%s: expected no diagnostics:\n%s", c->what, g.text);
    else
        ck_assert_msg(strstr(g.text, c->expect) != NULL, "%s: expected '%s' in:\n%s", c->what, c->expect, g.text);
    ck_assert(nf_layout_hash(l) != 0);
    nf_layout_free(l);
}
END_TEST

/* Lookups by exact size, sorted by offset, whatever the file order. */
START_TEST(test_layout_find)
{
    static const char text[] = "8192 z 2000 48\n4096 c 200 10\n4096 a 0 100\n16 tiny 0 4\n4096 b 100 100\n"
                               "8192 y 0 2000\n";
    static const struct { uint64_t bytes; size_t n; const char *names[3]; uint64_t off[3]; } cases[] = {
        {4096, 3, {"a", "b", "c"}, {0, 100, 200}},
        {8192, 2, {"y", "z"}, {0, 2000}},
        {16, 1, {"tiny"}, {0}},
        {0, 0, {NULL}, {0}},
        {4092, 0, {NULL}, {0}},
        {4100, 0, {NULL}, {0}},
        {UINT64_MAX, 0, {NULL}, {0}},
    };
    const nf_layout_entry_t *e;
    nf_layout_t *l;
    diags_t g;

    ck_assert_int_eq(layout(text, strlen(text), &g, &l), NF_OK);
    ck_assert_uint_eq(nf_layout_count(l), 6);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = nf_layout_find(l, cases[i].bytes, &e);
        ck_assert_msg(n == cases[i].n, "%" PRIu64 " bytes: %zu entries", cases[i].bytes, n);
        if (n == 0)
            ck_assert_ptr_null(e);
        for (size_t j = 0; j < n; j++) {
            ck_assert_str_eq(e[j].name, cases[i].names[j]);
            ck_assert_uint_eq(e[j].off, cases[i].off[j]);
            ck_assert_uint_eq(e[j].bytes, cases[i].bytes);
        }
    }
    ck_assert_uint_eq(nf_layout_find(l, 4096, &e), 3);
    ck_assert_uint_eq(e[1].count, 100);
    ck_assert_int_eq(e[1].line, 5);
    nf_layout_free(l);
    ck_assert_uint_eq(nf_layout_find(NULL, 4096, &e), 0);
    ck_assert_ptr_null(e);
    ck_assert_uint_eq(nf_layout_count(NULL), 0);
    ck_assert(nf_layout_hash(NULL) == 0);
    nf_layout_free(NULL);
}
END_TEST

static uint64_t layout_hash_of(const char *text)
{
    nf_layout_t *l;
    diags_t g;
    uint64_t h;

    ck_assert_int_eq(layout(text, strlen(text), &g, &l), NF_OK);
    h = nf_layout_hash(l);
    nf_layout_free(l);
    return h;
}

/* What a layout binds, not how the file says it. */
START_TEST(test_layout_hash)
{
    static const char base[] = "4096 a 0 100\n4096 b 100 100\n8192 a 0 10\n";
    static const char *const same[] = {
        "# c\n8192 a 0 10\n\n4096   b 100\t100\r\n4K a 0 100\n",
        "4096 a 0 100\n4096 b 100 100\n8KiB a 0 10\n4096 b 150 1\n",   /* a dropped line counts for nothing */
    };
    static const char *const differ[] = {
        "4096 a 0 100\n4096 c 100 100\n8192 a 0 10\n",
        "4096 a 0 100\n4096 b 100 101\n8192 a 0 10\n",
        "4096 a 0 100\n4096 b 101 100\n8192 a 0 10\n",
        "4096 a 0 100\n4096 b 100 100\n8196 a 0 10\n",
        "4096 a 0 100\n4096 b 100 100\n",
        "4096 ab 0 100\n8192 a 0 10\n",
    };
    check_hashes(layout_hash_of, base, same, NELEM(same), differ, NELEM(differ));
    ck_assert(layout_hash_of("") != 0);
}
END_TEST

START_TEST(test_layout_files)
{
    static const char *const bad_expect[] = {
        "bad.layout:3: 'b' [256, 768) overlaps 'a' [0, 512) of line 2 in 4096-byte calls; entry dropped",
        "bad.layout:4: BYTES 4098 is not a positive multiple of 4",
        "bad.layout:5: NAME 'a' appears twice for 4096-byte calls (first at line 2)",
        "bad.layout:6: 'd' ends past the call: OFFSET 0 + COUNT 2049 is more than the 2048 floats of 8192 bytes",
        "bad.layout:7: expected BYTES NAME OFFSET COUNT, found 3 fields",
    };
    const nf_layout_entry_t *e;
    nf_layout_t *l = NULL;
    nf_policy_t *p = NULL;
    char fifo[64];
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_layout_load("/nonexistent/x.layout", collect, &g, &l), NF_ERR_IO);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(g.text, "/nonexistent/x.layout:0: cannot open layout file: No such file") != NULL,
                  "got %s", g.text);
    ck_assert_int_eq(g.count[NF_POLICY_ERROR], 1);

    /* Not regular files: refused at once, without blocking on a FIFO. */
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_layout_load(NF_POLICY_FIXTURES, collect, &g, &l), NF_ERR_IO);
    ck_assert_msg(strstr(g.text, ":0: cannot read layout file: not a regular file") != NULL, "got %s", g.text);
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_layout_load("/dev/null", collect, &g, &l), NF_ERR_IO);
    ck_assert_msg(strstr(g.text, "/dev/null:0: cannot read layout file: not a regular file") != NULL, "got %s", g.text);
    snprintf(fifo, sizeof(fifo), "/tmp/nf_test_layout_fifo.%d", (int)getpid());
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_layout_load(fifo, collect, &g, &l), NF_ERR_IO);
    ck_assert_msg(strstr(g.text, "not a regular file") != NULL, "got %s", g.text);
    unlink(fifo);
    ck_assert_ptr_null(l);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_layout_load(fixture("bad.layout"), collect, &g, &l), NF_OK);
    for (size_t i = 0; i < sizeof(bad_expect) / sizeof(bad_expect[0]); i++)
        ck_assert_msg(strstr(g.text, bad_expect[i]) != NULL, "expected '%s' in:\n%s", bad_expect[i], g.text);
    ck_assert_int_eq(g.count[NF_POLICY_DISABLED], 5);
    ck_assert_uint_eq(nf_layout_find(l, 4096, &e), 2);
    ck_assert_str_eq(e[0].name, "a");
    ck_assert_str_eq(e[1].name, "f");
    nf_layout_free(l);

    /* The policy's relative `regions` path finds the fixture next to it. */
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("model.policy"), collect, &g, &p), NF_OK);
    ck_assert_int_eq(nf_layout_load(nf_policy_regions(p), collect, &g, &l), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "model.layout should be clean, got %s", g.text);
    ck_assert_uint_eq(nf_layout_count(l), 6);
    ck_assert_uint_eq(nf_layout_find(l, 136744, &e), 4);
    ck_assert_str_eq(e[0].name, "fc2.weight");
    ck_assert_str_eq(e[3].name, "head.bias");
    ck_assert_uint_eq(e[3].off + e[3].count, 136744 / 4);
    nf_layout_free(l);
    nf_policy_free(p);
}
END_TEST

static void count_only(const nf_policy_diag_t *d, void *arg)
{
    ((int *)arg)[d->severity]++;
}

/* Many entries in reverse order: the overlap check is not quadratic, and
 * every odd one but the first (overlapping the next even one) is dropped. */
START_TEST(test_layout_many)
{
    size_t n = 20000, cap = n * 40, used = 0;
    char *text = malloc(cap);
    const nf_layout_entry_t *e;
    nf_layout_t *l;
    int count[3] = {0, 0, 0};

    for (size_t i = n; i-- > 0;)
        used += (size_t)snprintf(text + used, cap - used, "4M r%zu %zu %d\n", i, i * 10, i % 2 ? 15 : 10);
    ck_assert_int_eq(nf_layout_parse(text, used, "many.layout", count_only, count, &l), NF_OK);
    ck_assert_int_eq(count[NF_POLICY_DISABLED], (int)(n / 2 - 1));
    ck_assert_uint_eq(nf_layout_find(l, 4u << 20, &e), n / 2 + 1);
    for (size_t i = 1; i < n / 2 + 1; i++)
        ck_assert_uint_le(e[i - 1].off + e[i - 1].count, e[i].off);
    nf_layout_free(l);
    free(text);
}
END_TEST

/* ------------------------------------------------------------ profiles */

#define PROF_HDR "# libnfcoll profile v1\n"
#define PROF_COLS "# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route\n"
#define PROF_FC1 "fc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 binary\n"
#define PROF_HEAD "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32\n"
#define PROF_HDR2 "# libnfcoll profile v2\n"
#define PROF_COLS2 "# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route lag_cosine ef_decay\n"
#define PROF_FC1_2 "fc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 binary - -\n"
#define PROF_HEAD_2 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - -\n"
/* What the writer writes: version 3, '-' where no decay was chosen, then
 * the integer routes' cosines and relative errors. */
#define PROF_HDR3 "# libnfcoll profile v3\n"
#define PROF_COLS3 "# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route lag_cosine " \
                   "ef_decay cos_int4 cos_int3 cos_int2 relerr_int4 relerr_int3 relerr_int2\n"
#define PROF_INTS3 " 0.9900 0.9700 0.9000 0.1000 0.2000 0.4000"
#define PROF_FC1_3 "fc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 int4 - -" PROF_INTS3 "\n"
#define PROF_HEAD_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4000 0.3000 0.2000 0.9000 1.0000 1.1000\n"
/* The integer columns of an entry literal: PROF_INTS3's numbers. */
#define PROF_INTS {0.99, 0.97, 0.9}, {0.1, 0.2, 0.4}

static nf_status_t profile(const char *text, size_t len, diags_t *g, nf_profile_t **p)
{
    memset(g, 0, sizeof(*g));
    *p = NULL;
    return nf_profile_parse(text, len, "t.profile", collect, g, p);
}

typedef struct profile_case {
    const char *what, *text;
    size_t entries;        /* loaded; (size_t)-1: does not load */
    int errors;
    const char *expect;    /* substring of the diagnostics, or NULL: none at all */
} profile_case_t;

#define NO_LOAD ((size_t)-1)
static const profile_case_t profile_cases[] = {
    {"the example", PROF_HDR PROF_COLS PROF_FC1 PROF_HEAD, 2, 0, NULL},
    {"header only", PROF_HDR, 0, 0, NULL},
    {"header, no newline", "# libnfcoll profile v1", 0, 0, NULL},
    {"comments and blanks", PROF_HDR "\n# more\n  # indented\n" PROF_FC1 "\n\n", 1, 0, NULL},
    {"CRLF", "# libnfcoll profile v1\r\nfc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 binary\r\n", 1, 0, NULL},
    {"tabs, no final newline", PROF_HDR "a\t1\t2\t0.5\t0.5\t0\t0\tternary", 1, 0, NULL},
    {"buffer segment", PROF_HDR "buffer:4096 1024 20 0.7 0.75 0.6 0.55 binary\n", 1, 0, NULL},
    {"bounds", PROF_HDR "a 0 0 -1 1 0 0.0000 fp32\nb 18446744073709551615 1 1.0000 -1.0 1e3 -0.0 fp32\n", 2, 0, NULL},
    {"empty file", "", NO_LOAD, 1,
     "t.profile:1: empty file: not a libnfcoll profile (expected '# libnfcoll profile v3' first)"},
    {"other version", "# libnfcoll profile v4\n" PROF_FC1, NO_LOAD, 1,
     "t.profile:1: not a libnfcoll profile: the first line must be '# libnfcoll profile v3', "
     "'# libnfcoll profile v2' or '# libnfcoll profile v1' (found '# libnfcoll profile v4')"},
    {"v3", PROF_HDR3 PROF_COLS3 PROF_FC1_3 PROF_HEAD_3
     "b 5 20 0.5 0.5 0.5 0.5 fp32 -0.3125 1 -1 1 -0.0 0 1e3 0.0000\n"
     "c 5 20 0.5 0.5 0.5 0.5 binary 0.2 0.25 0.5 0.5 0.5 0.5 0.5 0.5\n", 4, 0, NULL},
    {"v3 header only", PROF_HDR3, 0, 0, NULL},
    {"v3, v2's fields", PROF_HDR3 PROF_FC1_2, NO_LOAD, 1,
     "t.profile:2: expected 16 fields (segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary "
     "route lag_cosine ef_decay cos_int4 cos_int3 cos_int2 relerr_int4 relerr_int3 relerr_int2), found 10"},
    {"v3, v1's fields", PROF_HDR3 PROF_FC1, NO_LOAD, 1, "t.profile:2: expected 16 fields (segment "},
    {"v3, one integer column short", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 0.5 0.5 0.5 0.5\n", NO_LOAD, 1,
     "t.profile:2: expected 16 fields (segment elements calls"},
    {"v3, one field too many", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 0.5 0.5 0.5 0.5 0.5 0.5\n", NO_LOAD,
     1, "t.profile:2: expected 16 fields (segment elements calls"},
    {"v2, v3's fields", PROF_HDR2 PROF_FC1_3, NO_LOAD, 1,
     "t.profile:2: expected 10 fields (segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary "
     "route lag_cosine ef_decay), found 16"},
    {"v1, v3's fields", PROF_HDR PROF_FC1_3, NO_LOAD, 1, "t.profile:2: expected 8 fields"},
    {"v3 cos_int4 above 1", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 1.0001 0.5 0.5 0.5 0.5 0.5\n", NO_LOAD, 1,
     "t.profile:2: bad cos_int4 '1.0001' (expected a number from -1 to 1)"},
    {"v3 cos_int3 below -1", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 -1.5 0.5 0.5 0.5 0.5\n", NO_LOAD, 1,
     "t.profile:2: bad cos_int3 '-1.5' (expected a number from -1 to 1)"},
    {"v3 cos_int2 nan", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 0.5 nan 0.5 0.5 0.5\n", NO_LOAD, 1,
     "t.profile:2: bad cos_int2 'nan' (expected a number from -1 to 1)"},
    {"v3 negative relerr_int4", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 0.5 0.5 -0.1 0.5 0.5\n", NO_LOAD, 1,
     "t.profile:2: bad relerr_int4 '-0.1' (expected a number >= 0)"},
    {"v3 relerr_int3 '-'", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 0.5 0.5 0.5 - 0.5\n", NO_LOAD, 1,
     "t.profile:2: bad relerr_int3 '-' (expected a number >= 0)"},
    {"v3 relerr_int2 inf", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 int4 - - 0.5 0.5 0.5 0.5 0.5 inf\n", NO_LOAD, 1,
     "t.profile:2: bad relerr_int2 'inf' (expected a number >= 0)"},
    {"v3 cos_int4 '-'", PROF_HDR3 "a 5 20 0.5 0.5 0.5 0.5 fp32 - - - 0.5 0.5 0.5 0.5 0.5\n", NO_LOAD, 1,
     "t.profile:2: bad cos_int4 '-'"},
    {"v3 every integer column bad", PROF_HDR3 "\na 5 20 0.5 0.5 0.5 0.5 int4 - - 2 x -2 -1 y 0,5\n", NO_LOAD, 6,
     "t.profile:3: bad relerr_int2 '0,5'"},
    {"v2", PROF_HDR2 PROF_COLS2 PROF_FC1_2 "b 5 20 0.5 0.5 0.5 0.5 fp32 -0.3125 1\nc 5 20 0.5 0.5 0.5 0.5 fp32 0.2 0.25\n",
     3, 0, NULL},
    {"v2, v1's fields", PROF_HDR2 PROF_FC1, NO_LOAD, 1,
     "t.profile:2: expected 10 fields (segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary "
     "route lag_cosine ef_decay), found 8"},
    {"v1, v2's fields", PROF_HDR PROF_FC1_2, NO_LOAD, 1, "t.profile:2: expected 8 fields"},
    {"v2 lag above 1", PROF_HDR2 "a 5 20 0.5 0.5 0.5 0.5 fp32 1.5 -\n", NO_LOAD, 1,
     "t.profile:2: bad lag_cosine '1.5' (expected a number from -1 to 1, or '-')"},
    {"v2 decay above 1", PROF_HDR2 "a 5 20 0.5 0.5 0.5 0.5 fp32 - 2\n", NO_LOAD, 1,
     "t.profile:2: bad ef_decay '2' (expected a number from 0 to 1, or '-')"},
    {"v2 negative decay", PROF_HDR2 "a 5 20 0.5 0.5 0.5 0.5 fp32 0.1 -0.5\n", NO_LOAD, 1,
     "t.profile:2: bad ef_decay '-0.5'"},
    {"v2 two dashes", PROF_HDR2 "a 5 20 0.5 0.5 0.5 0.5 fp32 -- -\n", NO_LOAD, 1, "t.profile:2: bad lag_cosine '--'"},
    {"header after a comment", "# comment\n" PROF_HDR, NO_LOAD, 1, "t.profile:1: not a libnfcoll profile"},
    {"indented header", " " PROF_HDR, NO_LOAD, 1, "t.profile:1: not a libnfcoll profile"},
    {"header with a tail", "# libnfcoll profile v1 extra\n", NO_LOAD, 1, "t.profile:1: not a libnfcoll profile"},
    {"a policy file", "[policy]\nversion = 1\n", NO_LOAD, 1, "(found '[policy]')"},
    {"binary junk", "\x7f" "ELF\x02\x01\x01\n", NO_LOAD, 1, "(found '?ELF\?\?\?')"},
    {"too few fields", PROF_HDR PROF_COLS "fc1.weight 200704 20 0.9312 0.9501 0.3671 binary\n", NO_LOAD, 1,
     "t.profile:3: expected 8 fields (segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary "
     "route), found 7"},
    {"too many fields", PROF_HDR "a 1 1 0.5 0.5 0.5 0.5 fp32 # no\n", NO_LOAD, 1, "t.profile:2: expected 8 fields"},
    {"bad elements", PROF_HDR "a -5 20 0.5 0.5 0.5 0.5 fp32\n", NO_LOAD, 1,
     "t.profile:2: bad elements '-5' (expected an unsigned decimal integer)"},
    {"bad calls", PROF_HDR "a 5 2e1 0.5 0.5 0.5 0.5 fp32\n", NO_LOAD, 1, "t.profile:2: bad calls '2e1'"},
    {"cos_binary above 1", PROF_HDR "a 5 20 1.5 0.5 0.5 0.5 fp32\n", NO_LOAD, 1,
     "t.profile:2: bad cos_binary '1.5' (expected a number from -1 to 1)"},
    {"cos_ternary below -1", PROF_HDR "a 5 20 0.5 -1.0001 0.5 0.5 fp32\n", NO_LOAD, 1,
     "t.profile:2: bad cos_ternary '-1.0001' (expected a number from -1 to 1)"},
    {"negative relerr", PROF_HDR "a 5 20 0.5 0.5 -0.1 0.5 fp32\n", NO_LOAD, 1,
     "t.profile:2: bad relerr_binary '-0.1' (expected a number >= 0)"},
    {"relerr nan", PROF_HDR "a 5 20 0.5 0.5 0.5 nan fp32\n", NO_LOAD, 1, "t.profile:2: bad relerr_ternary 'nan'"},
    {"decimal comma", PROF_HDR "a 5 20 0,5 0.5 0.5 0.5 fp32\n", NO_LOAD, 1, "t.profile:2: bad cos_binary '0,5'"},
    {"route pmpi", PROF_HDR "a 5 20 0.5 0.5 0.5 0.5 pmpi\n", NO_LOAD, 1,
     "t.profile:2: bad route 'pmpi' (expected binary|ternary|int4|int3|int2|fp32)"},
    {"route bf16", PROF_HDR "a 5 20 0.5 0.5 0.5 0.5 bf16\n", NO_LOAD, 1,
     "t.profile:2: bad route 'bf16' (expected binary|ternary|int4|int3|int2|fp32)"},
    {"integer routes", PROF_HDR "a 5 20 0.5 0.5 0.5 0.5 int4\nb 5 20 0.5 0.5 0.5 0.5 int3\n"
     "c 5 20 0.5 0.5 0.5 0.5 int2\n", 3, 0, NULL},
    {"route auto", PROF_HDR "a 5 20 0.5 0.5 0.5 0.5 auto\n", NO_LOAD, 1, "t.profile:2: bad route 'auto'"},
    {"route in capitals", PROF_HDR "a 5 20 0.5 0.5 0.5 0.5 Binary\n", NO_LOAD, 1, "t.profile:2: bad route 'Binary'"},
    {"segment with control byte", PROF_HDR "a\002 5 20 0.5 0.5 0.5 0.5 fp32\n", NO_LOAD, 1,
     "t.profile:2: segment 'a?' has byte 0x02 (expected printable ASCII, no spaces)"},
    {"segment too long", PROF_HDR N127 "n 5 20 0.5 0.5 0.5 0.5 fp32\n", NO_LOAD, 1,
     "t.profile:2: segment too long (128 bytes; at most 127)"},
    {"every bad field", PROF_HDR "a\001 x y 2 2 -1 -1 warp\n", NO_LOAD, 8, "t.profile:2: bad route 'warp'"},
    {"duplicate segment", PROF_HDR PROF_COLS PROF_FC1 PROF_HEAD "\n" PROF_FC1, NO_LOAD, 1,
     "t.profile:6: duplicate segment 'fc1.weight' (first at line 3)"},
    {"same name, other case", PROF_HDR "a 1 1 0 0 0 0 fp32\nA 1 1 0 0 0 0 fp32\n", 2, 0, NULL},
    {"bad line and duplicate", PROF_HDR "a 1 1 0 0 0 0 fp32\nb 1 1 0 0 0 0 fp\na 1 1 0 0 0 0 fp32\n", NO_LOAD, 2,
     "t.profile:4: duplicate segment 'a' (first at line 2)"},
};

START_TEST(test_profile_lines)
{
    const profile_case_t *c = &profile_cases[_i];
    size_t len = strlen(c->text);
    nf_profile_t *p;
    diags_t g;
    nf_status_t rc = profile(c->text, len, &g, &p);

    if (c->entries == NO_LOAD) {
        ck_assert_msg(rc == NF_ERR_PARSE && p == NULL, "%s: should not load (rc %d)", c->what, rc);
    } else {
        ck_assert_msg(rc == NF_OK, "%s: should load (rc %d):\n%s", c->what, rc, g.text);
        ck_assert_uint_eq(nf_profile_count(p), c->entries);
        ck_assert(nf_profile_hash(p) != 0);
    }
    ck_assert_msg(g.count[NF_POLICY_ERROR] == c->errors, "%s: %d errors:\n%s", c->what, g.count[NF_POLICY_ERROR],
                  g.text);
    ck_assert_int_eq(g.count[NF_POLICY_WARNING] + g.count[NF_POLICY_DISABLED], 0);
    if (c->expect == NULL)
        ck_assert_msg(g.text[0] == '\0', "%s: expected no diagnostics:\n%s", c->what, g.text);
    else
        ck_assert_msg(strstr(g.text, c->expect) != NULL, "%s: expected '%s' in:\n%s", c->what, c->expect, g.text);
    nf_profile_free(p);
}
END_TEST

START_TEST(test_profile_find)
{
    static const char text[] = PROF_HDR PROF_COLS PROF_FC1 PROF_HEAD "buffer:4096 1024 20 0.7 0.75 0.6 0.55 binary\n";
    const nf_profile_entry_t *e;
    nf_profile_t *p;
    diags_t g;

    ck_assert_int_eq(profile(text, strlen(text), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_profile_count(p), 3);
    e = nf_profile_find(p, "fc1.weight");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->segment, "fc1.weight");
    ck_assert_uint_eq(e->elements, 200704);
    ck_assert_uint_eq(e->calls, 20);
    ck_assert(e->cos_binary == 0.9312 && e->cos_ternary == 0.9501);
    ck_assert(e->relerr_binary == 0.3671 && e->relerr_ternary == 0.3102);
    ck_assert_int_eq(e->route, NF_ROUTE_BINARY);
    ck_assert_int_eq(nf_profile_find(p, "head.weight")->route, NF_ROUTE_FP32);
    ck_assert_int_eq(nf_profile_find(p, "buffer:4096")->route, NF_ROUTE_BINARY);
    ck_assert_ptr_null(nf_profile_find(p, "head"));
    ck_assert_ptr_null(nf_profile_find(p, "fc1.weight "));
    ck_assert_ptr_null(nf_profile_find(p, "buffer:4097"));
    ck_assert_ptr_null(nf_profile_find(p, ""));
    ck_assert_ptr_null(nf_profile_find(p, NULL));
    ck_assert_str_eq(nf_profile_entry(p, 0)->segment, "fc1.weight");
    ck_assert_str_eq(nf_profile_entry(p, 2)->segment, "buffer:4096");
    ck_assert_ptr_null(nf_profile_entry(p, 3));
    nf_profile_free(p);
    ck_assert_ptr_null(nf_profile_find(NULL, "fc1.weight"));
    ck_assert_ptr_null(nf_profile_entry(NULL, 0));
    ck_assert_uint_eq(nf_profile_count(NULL), 0);
    ck_assert(nf_profile_hash(NULL) == 0);
    nf_profile_free(NULL);
}
END_TEST

/* Enough segments for the table to hold long probe chains: each is found. */
START_TEST(test_profile_find_many)
{
    size_t n = 5000, cap = n * 64, used;
    char *text = malloc(cap), name[32];
    nf_profile_t *p;
    diags_t g;

    used = (size_t)snprintf(text, cap, PROF_HDR);
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used, "layer%zu.w %zu 20 0.5 0.5 0.5 0.5 %s\n", i, i,
                                 i % 3 ? "fp32" : "binary");
    ck_assert_int_eq(profile(text, used, &g, &p), NF_OK);
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "layer%zu.w", i);
        ck_assert_uint_eq(nf_profile_find(p, name)->elements, i);
        snprintf(name, sizeof(name), "layer%zu.b", i);
        ck_assert_ptr_null(nf_profile_find(p, name));
    }
    nf_profile_free(p);
    free(text);
}
END_TEST

static uint64_t profile_hash_of(const char *text)
{
    nf_profile_t *p;
    diags_t g;
    uint64_t h;

    ck_assert_int_eq(profile(text, strlen(text), &g, &p), NF_OK);
    h = nf_profile_hash(p);
    nf_profile_free(p);
    return h;
}

/* Every field counts; order, comments and spelling do not. */
START_TEST(test_profile_hash)
{
    static const char base[] = PROF_HDR PROF_FC1 PROF_HEAD;
    static const char *const same[] = {
        PROF_HDR PROF_COLS "# again\n" PROF_HEAD "\n" PROF_FC1,
        PROF_HDR "fc1.weight  200704\t20 0.93120 .9501 3.671e-1 0.3102 binary\r\n" PROF_HEAD,
        PROF_HDR PROF_FC1 "head.weight 1280 20 0.41 0.52 0.9 0.8 fp32\n",
    };
    static const char *const differ[] = {
        PROF_HDR PROF_FC1,
        PROF_HDR PROF_FC1 "head.weigh 1280 20 0.4100 0.5200 0.9000 0.8000 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1281 20 0.4100 0.5200 0.9000 0.8000 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1280 21 0.4100 0.5200 0.9000 0.8000 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1280 20 0.4101 0.5200 0.9000 0.8000 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1280 20 0.4100 0.5201 0.9000 0.8000 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1280 20 0.4100 0.5200 0.9001 0.8000 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8001 fp32\n",
        PROF_HDR PROF_FC1 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 ternary\n",
        PROF_HDR PROF_FC1 PROF_HEAD "x 1 1 0 0 0 0 fp32\n",
    };

    check_hashes(profile_hash_of, base, same, NELEM(same), differ, NELEM(differ));
    ck_assert(profile_hash_of(PROF_HDR) != 0);
    ck_assert(profile_hash_of(PROF_HDR "a 1 1 0 0 -0.0 0 fp32\n") == profile_hash_of(PROF_HDR "a 1 1 0 0 0 0 fp32\n"));
}
END_TEST

/* A v1 or v2 profile hashes as it did before v3 (the v2 reader of commit
 * bc1cf34 gave these; the integer columns, NaN, are not hashed), and in
 * v3 every integer column counts. */
START_TEST(test_profile_hash_v3)
{
    static const char v2[] = PROF_HDR2 "a 20 20 0.9000 0.9000 0.3000 0.3000 binary -0.3125 1.0000\n"
                             "b 20 20 0.9000 0.9000 0.3000 0.3000 binary 0.1875 0.2500\n"
                             "c 20 20 0.9000 0.9000 0.3000 0.3000 ternary - -\n";
    ck_assert_msg(profile_hash_of(PROF_HDR PROF_FC1 PROF_HEAD) == UINT64_C(0xe85499d380803c57), "v1: %#" PRIx64,
                  profile_hash_of(PROF_HDR PROF_FC1 PROF_HEAD));
    ck_assert_msg(profile_hash_of(v2) == UINT64_C(0xcfa2ad8d726b9b04), "v2: %#" PRIx64, profile_hash_of(v2));
    ck_assert(profile_hash_of(PROF_HDR PROF_FC1) == profile_hash_of(PROF_HDR2 PROF_FC1_2));

    static const char base[] = PROF_HDR3 PROF_FC1_3 PROF_HEAD_3;
    static const char *const same[] = {
        PROF_HDR3 PROF_COLS3 "# again\n" PROF_HEAD_3 "\n" PROF_FC1_3,
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.41 0.52 0.9 0.8 fp32 - - .4 0.30 2e-1 0.9 1 1.1\n",
    };
    static const char *const differ[] = {
        PROF_HDR PROF_FC1 PROF_HEAD, /* the same without the integer columns */
        PROF_HDR2 PROF_FC1_2 PROF_HEAD_2,
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4001 0.3 0.2 0.9 1 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4 0.3001 0.2 0.9 1 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4 0.3 0.2001 0.9 1 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4 0.3 0.2 0.9001 1 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4 0.3 0.2 0.9 1.0001 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.4 0.3 0.2 0.9 1 1.1001\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 - - 0.3 0.4 0.2 0.9 1 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 int4 - - 0.4 0.3 0.2 0.9 1 1.1\n",
        PROF_HDR3 PROF_FC1_3 "head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32 0.1 - 0.4 0.3 0.2 0.9 1 1.1\n",
    };
    check_hashes(profile_hash_of, base, same, NELEM(same), differ, NELEM(differ));
    ck_assert(profile_hash_of(PROF_HDR3 "a 1 1 0 0 0 0 fp32 - - -0.0 0 0 0 0 0\n") ==
              profile_hash_of(PROF_HDR3 "a 1 1 0 0 0 0 fp32 - - 0 0 0 0 0 0\n"));
}
END_TEST

/* int4 where its cosine reaches admit (>=), else fp32; the other routes'
 * cosines choose nothing, however high (no signal is shown to pick a
 * cheaper route safely); NaN admits nothing. */
typedef struct choose_case { double cb, ct, c4, c3, c2, admit; nf_route_t route; } choose_case_t;

static const choose_case_t choose_cases[] = {
    {0.4, 0.4, 0.5, 0.4, 0.4, 0.5, NF_ROUTE_INT4},
    {0.9, 0.95, 0.5000001, 0.9, 0.9, 0.5, NF_ROUTE_INT4},
    {0.99, 0.99, 0.4999999, 0.99, 0.99, 0.5, NF_ROUTE_FP32},     /* binary, ternary, int3, int2 would pass */
    {1.0, 1.0, 0.9999, 1.0, 1.0, 1.0, NF_ROUTE_FP32},
    {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, NF_ROUTE_INT4},
    {-1.0, -1.0, 0.96, -1.0, -1.0, 0.95, NF_ROUTE_INT4},         /* the others below admit */
    {-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, NF_ROUTE_INT4},
    {-1.0, -1.0, -1.0, -1.0, -1.0, -0.9999, NF_ROUTE_FP32},
    {0.0, 0.0, -0.0, 0.0, 0.0, 0.0, NF_ROUTE_INT4},
    {0.9, 0.9, NAN, 0.9, 0.9, 0.5, NF_ROUTE_FP32},               /* a v1 or v2 entry */
    {NAN, NAN, 0.8, NAN, NAN, 0.5, NF_ROUTE_INT4},
    {0.8, 0.9, 0.99, 0.9, 0.9, NAN, NF_ROUTE_FP32},
};

START_TEST(test_profile_choose)
{
    const choose_case_t *c = &choose_cases[_i];
    nf_profile_entry_t e = {"a", 1, 1, c->cb, c->ct, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0,
                            {c->c4, c->c3, c->c2}, {0.5, 0.5, 0.5}};

    ck_assert_msg(nf_profile_choose(&e, c->admit) == c->route, "case %d: choose(int4 %g, admit %g) = %d", _i,
                  c->c4, c->admit, nf_profile_choose(&e, c->admit));
    if (_i == 0)
        ck_assert_int_eq(nf_profile_choose(NULL, 0.5), NF_ROUTE_FP32);
}
END_TEST

/* What nf_profile_write produces, in memory. */
static char *profile_text(const nf_profile_entry_t *e, size_t n, int *rc, int *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(m);
    errno = 0;
    *rc = nf_profile_write(m, e, n);
    *err = errno;
    ck_assert_int_eq(fclose(m), 0);
    return text;
}

/* Written, read back, written again: the same entries and the same text. */
START_TEST(test_profile_round_trip)
{
    static const nf_profile_entry_t in[] = {
        {"fc1.weight", 200704, 20, 0.9312, 0.9501, 0.3671, 0.3102, NF_ROUTE_INT4, NAN, -1.0, PROF_INTS},
        {"head.weight", 1280, 20, 0.41, 0.52, 0.9, 0.8, NF_ROUTE_FP32, NAN, -1.0, {0.4, 0.3, 0.2}, {0.9, 1.0, 1.1}},
        {"buffer:4096", 1024, 1, -1.0, 1.0, 0.0, 123456.789, NF_ROUTE_TERNARY, NAN, -1.0,
         {-1.0, 1.0, -0.0}, {0.0, 1e-4, 98765.4321}},
        {"x!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", UINT64_MAX, 0, -0.25, 0.0001, 1e-4, 2.5, NF_ROUTE_INT2, -0.5, 0.25,
         PROF_INTS},
    };
    static const char expect[] = PROF_HDR3 PROF_COLS3 PROF_FC1_3 PROF_HEAD_3
        "buffer:4096 1024 1 -1.0000 1.0000 0.0000 123456.7890 ternary - - -1.0000 1.0000 -0.0000 0.0000 0.0001 "
        "98765.4321\n"
        "x!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ 18446744073709551615 0 -0.2500 0.0001 0.0001 2.5000 int2 -0.5000 0.2500"
        PROF_INTS3 "\n";
    nf_profile_entry_t out[4];
    nf_profile_t *p;
    diags_t g;
    char *text, *again;
    int rc, err;

    text = profile_text(in, 4, &rc, &err);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strcmp(text, expect) == 0, "wrote:\n%s", text);
    ck_assert_int_eq(profile(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "%s", g.text);
    ck_assert_uint_eq(nf_profile_count(p), 4);
    for (size_t i = 0; i < 4; i++) {
        const nf_profile_entry_t *e = nf_profile_entry(p, i);
        ck_assert_str_eq(e->segment, in[i].segment);
        ck_assert_uint_eq(e->elements, in[i].elements);
        ck_assert_uint_eq(e->calls, in[i].calls);
        ck_assert_msg(e->cos_binary == in[i].cos_binary && e->cos_ternary == in[i].cos_ternary &&
                      e->relerr_binary == in[i].relerr_binary && e->relerr_ternary == in[i].relerr_ternary,
                      "entry %zu numbers changed", i);
        for (int k = 0; k < 3; k++)
            ck_assert_msg(e->cos_int[k] == in[i].cos_int[k] && e->relerr_int[k] == in[i].relerr_int[k],
                          "entry %zu integer column %d changed: %g %g", i, k, e->cos_int[k], e->relerr_int[k]);
        ck_assert_int_eq(e->route, in[i].route);
        ck_assert(e->lag_cosine == in[i].lag_cosine || (isnan(e->lag_cosine) && isnan(in[i].lag_cosine)));
        ck_assert(e->ef_decay == in[i].ef_decay);
        out[i] = *e;
    }
    again = profile_text(out, 4, &rc, &err);
    ck_assert_str_eq(again, text);
    nf_profile_free(p);
    free(again);
    free(text);
}
END_TEST

/* More digits than %.4f keeps: read back rounded, then stable. */
START_TEST(test_profile_round_trip_rounding)
{
    const nf_profile_entry_t in[] = {
        {"a", 1, 1, 0.93124999, 0.99996, 1e-9, 0.123456789, NF_ROUTE_BINARY, NAN, -1.0,
         {0.49996, -0.00004, 0.1}, {1e-9, 0.123456789, 2}},
        {"b", 2, 2, -0.99996, -0.00004, 1e300, 0.00005, NF_ROUTE_TERNARY, NAN, -1.0, PROF_INTS},
    };
    nf_profile_entry_t out[2];
    nf_profile_t *p;
    diags_t g;
    char *text, *again;
    int rc, err;

    text = profile_text(in, 2, &rc, &err);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(text, "\na 1 1 0.9312 1.0000 0.0000 0.1235 binary - - 0.5000 -0.0000 0.1000 0.0000 0.1235 "
                               "2.0000\n") != NULL, "wrote:\n%s", text);
    ck_assert_msg(strstr(text, "\nb 2 2 -1.0000 -0.0000 1000000000000000052504760255204420248704468581108159154"),
                  "wrote:\n%s", text);
    ck_assert_int_eq(profile(text, strlen(text), &g, &p), NF_OK);
    for (size_t i = 0; i < 2; i++)
        out[i] = *nf_profile_entry(p, i);
    ck_assert(out[0].cos_binary == 0.9312 && out[0].cos_ternary == 1.0 && out[1].cos_binary == -1.0);
    ck_assert(out[0].cos_int[0] == 0.5 && out[0].cos_int[1] == 0 && out[0].relerr_int[1] == 0.1235);
    again = profile_text(out, 2, &rc, &err);
    ck_assert_str_eq(again, text);
    nf_profile_free(p);
    free(again);
    free(text);
}
END_TEST

/* Version 2's evidence and choice: read, chosen by the rule of
 * nf_profile_choose_decay, written back; route = auto runs the profile's
 * decay where the rule names none, and the rule's where it does. */
START_TEST(test_profile_decay)
{
    static const char text[] = PROF_HDR2 PROF_COLS2
        "a 20 20 0.9000 0.9000 0.3000 0.3000 binary -0.3125 1.0000\n"
        "b 20 20 0.9000 0.9000 0.3000 0.3000 binary 0.1875 0.2500\n"
        "c 20 20 0.9000 0.9000 0.3000 0.3000 ternary - -\n";
    static const char pol_text[] =
        "[policy]\nversion = 2\n\n[rule pinned]\nregion = b\nroute = auto\nef_decay = 0.5\n\n"
        "[rule model]\ndatatype = float\nop = sum\nroute = auto\n";
    static const char lay_text[] = "240 a 0 20\n240 b 20 20\n240 c 40 20\n";
    nf_profile_t *p, *q;
    nf_policy_t *pol;
    nf_layout_t *lay;
    diags_t g;
    int rc, err;

    /* the rule: the whole residual against a lag below 0, a quarter from 0
     * on; the settings' with too few calls or none measured */
    ck_assert(nf_profile_choose_decay(-0.01, NF_PROFILE_LAG_MIN) == NF_PROFILE_DECAY_KEEP);
    ck_assert(nf_profile_choose_decay(0.0, 80) == NF_PROFILE_DECAY_CUT);
    ck_assert(nf_profile_choose_decay(0.4, 80) == NF_PROFILE_DECAY_CUT);
    ck_assert(nf_profile_choose_decay(-0.4, NF_PROFILE_LAG_MIN - 1) < 0);
    ck_assert(nf_profile_choose_decay(NAN, 80) < 0);

    ck_assert_int_eq(profile(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "%s", g.text);
    const nf_profile_entry_t *a = nf_profile_find(p, "a"), *b = nf_profile_find(p, "b"),
                             *c = nf_profile_find(p, "c");
    ck_assert(a->lag_cosine == -0.3125 && a->ef_decay == 1.0);
    ck_assert(b->lag_cosine == 0.1875 && b->ef_decay == 0.25);
    ck_assert(isnan(c->lag_cosine) && c->ef_decay < 0);
    /* the same cosines with another decay hash apart; a v1 entry hashes as before */
    static const char other[] = PROF_HDR2 "a 20 20 0.9 0.9 0.3 0.3 binary -0.3125 0.2500\n"
                                "b 20 20 0.9 0.9 0.3 0.3 binary 0.1875 0.2500\n"
                                "c 20 20 0.9 0.9 0.3 0.3 ternary - -\n";
    ck_assert_int_eq(profile(other, strlen(other), &g, &q), NF_OK);
    ck_assert(nf_profile_hash(p) != nf_profile_hash(q));
    nf_profile_free(q);
    static const char v1[] = PROF_HDR "c 20 20 0.9 0.9 0.3 0.3 ternary\n";
    static const char v2[] = PROF_HDR2 "c 20 20 0.9 0.9 0.3 0.3 ternary - -\n";
    nf_profile_t *p1, *p2;
    ck_assert_int_eq(profile(v1, strlen(v1), &g, &p1), NF_OK);
    ck_assert_int_eq(profile(v2, strlen(v2), &g, &p2), NF_OK);
    ck_assert(nf_profile_hash(p1) == nf_profile_hash(p2));
    nf_profile_free(p1);
    nf_profile_free(p2);

    /* Read from v2, the integer columns are NaN: written back (always v3)
     * only once they are set, then with v2's columns as they were. */
    nf_profile_entry_t out[3];
    for (size_t i = 0; i < 3; i++) {
        out[i] = *nf_profile_entry(p, i);
        ck_assert(isnan(out[i].cos_int[0]) && isnan(out[i].cos_int[2]) && isnan(out[i].relerr_int[1]));
    }
    char *again = profile_text(out, 3, &rc, &err);
    ck_assert_msg(rc == NF_ERR_INVALID && err == EINVAL && again[0] == '\0', "v2 entries written: %s", again);
    free(again);
    for (size_t i = 0; i < 3; i++)
        out[i].cos_int[0] = out[i].cos_int[1] = out[i].cos_int[2] = 0.5,
        out[i].relerr_int[0] = out[i].relerr_int[1] = out[i].relerr_int[2] = 0.25;
    again = profile_text(out, 3, &rc, &err);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(again, PROF_HDR3 PROF_COLS3
                     "a 20 20 0.9000 0.9000 0.3000 0.3000 binary -0.3125 1.0000 0.5000 0.5000 0.5000 0.2500 0.2500 0.2500\n"
                     "b 20 20 0.9000 0.9000 0.3000 0.3000 binary 0.1875 0.2500 0.5000 0.5000 0.5000 0.2500 0.2500 0.2500\n"
                     "c 20 20 0.9000 0.9000 0.3000 0.3000 ternary - - 0.5000 0.5000 0.5000 0.2500 0.2500 0.2500\n");
    free(again);

    ck_assert_int_eq(parse(pol_text, strlen(pol_text), &g, &pol), NF_OK);
    ck_assert_int_eq(layout(lay_text, strlen(lay_text), &g, &lay), NF_OK);
    nf_decide_ctx_t x = {.pol = pol, .layout = lay, .prof = p, .count_bits = 16};
    nf_decide_call_t call = {.comm_name = "w", .comm_size = 2, .dt = NF_DT_FLOAT, .op = NF_OP_SUM,
                             .bytes = 240, .count = 60};
    nf_decide_t d = {0};
    ck_assert_int_eq(nf_decide(&x, &call, 1, &d), NF_OK);
    ck_assert_uint_eq(d.nseg, 3);
    ck_assert_msg(d.seg[0].act.ef_decay == 1.0, "a: %g", d.seg[0].act.ef_decay);
    ck_assert_msg(d.seg[1].act.ef_decay == 0.5, "b (the rule's): %g", d.seg[1].act.ef_decay);
    ck_assert_msg(d.seg[2].act.ef_decay < 0, "c (the settings'): %g", d.seg[2].act.ef_decay);
    ck_assert_int_eq(d.seg[2].route, NF_ROUTE_TERNARY);
    /* what the stats' admission record and nfcoll_replay say ran, and by what */
    nf_settings_t st = {.ef = 1, .ef_decay = 0.75, .scale_block = 1024};
    nf_decide_params_t pa;
    nf_decide_params(&d.seg[0].act, &d.seg[0].why, d.seg[0].route, &st, &pa);
    ck_assert_msg(pa.ef_decay == 1.0 && strcmp(pa.decay_by, "profile") == 0, "a: %g by %s",
                  pa.ef_decay, pa.decay_by);
    ck_assert_msg(pa.scale_block == 1024 && strcmp(pa.block_by, "settings") == 0, "a: %ld by %s",
                  pa.scale_block, pa.block_by);
    nf_decide_params(&d.seg[1].act, &d.seg[1].why, d.seg[1].route, &st, &pa);
    ck_assert_msg(pa.ef_decay == 0.5 && strcmp(pa.decay_by, "rule") == 0, "b: %g by %s",
                  pa.ef_decay, pa.decay_by);
    nf_decide_params(&d.seg[2].act, &d.seg[2].why, d.seg[2].route, &st, &pa);
    ck_assert_msg(pa.ef_decay == 0.75 && strcmp(pa.decay_by, "settings") == 0, "c: %g by %s",
                  pa.ef_decay, pa.decay_by);
    st.ef = 0;
    nf_decide_params(&d.seg[2].act, &d.seg[2].why, d.seg[2].route, &st, &pa);
    ck_assert_msg(isnan(pa.ef_decay) && strcmp(pa.decay_by, "ef-off") == 0, "c, ef off: %g by %s",
                  pa.ef_decay, pa.decay_by);
    ck_assert_msg(pa.scale_block == -1 && pa.block_by == NULL, "c is ternary: no scale block");
    /* a route without a residual has neither */
    st.ef = 1;
    nf_decide_params(&d.seg[2].act, &d.seg[2].why, NF_ROUTE_FP32, &st, &pa);
    ck_assert(isnan(pa.ef_decay) && pa.decay_by == NULL && pa.block_by == NULL);
    /* a calibration run: its shadows' decay, calibration's own unless
     * NFCOLL_EF_DECAY gave one; the settings' error feedback */
    nf_decide_reason_t cal = {NF_WHY_CALIBRATE, NULL, 0};
    nf_policy_action_t off = d.seg[2].act;
    off.ef = 0;
    nf_decide_params(&off, &cal, NF_ROUTE_FP32, &st, &pa);
    ck_assert_msg(pa.ef_decay == NF_PROFILE_DECAY_CUT && strcmp(pa.decay_by, "calibrate") == 0 &&
                      pa.scale_block == 1024, "calibrate: %g by %s, block %ld", pa.ef_decay,
                  pa.decay_by, pa.scale_block);
    ck_assert(nf_decide_shadow_decay(&st) == NF_PROFILE_DECAY_CUT);
    st.ef_decay_set = 1;
    nf_decide_params(&off, &cal, NF_ROUTE_FP32, &st, &pa);
    ck_assert_msg(pa.ef_decay == 0.75 && strcmp(pa.decay_by, "settings") == 0,
                  "calibrate, NFCOLL_EF_DECAY given: %g by %s", pa.ef_decay, pa.decay_by);
    ck_assert(nf_decide_shadow_decay(&st) == 0.75);
    st.ef_decay_set = 0;
    nf_policy_action_t blk = d.seg[1].act;
    blk.scale_block = 512, blk.ef = 1;
    nf_decide_params(&blk, &d.seg[1].why, NF_ROUTE_BINARY, &st, &pa);
    ck_assert_msg(pa.scale_block == 512 && strcmp(pa.block_by, "rule") == 0 &&
                      strcmp(pa.decay_by, "rule") == 0, "rule's block: %ld by %s, decay by %s",
                  pa.scale_block, pa.block_by, pa.decay_by);
    nf_decide_free(&d);
    nf_layout_free(lay);
    nf_policy_free(pol);
    nf_profile_free(p);
}
END_TEST

/* The writer refuses what the reader would, and writes nothing then. */
typedef struct write_case { const char *what; nf_profile_entry_t e[2]; size_t n; } write_case_t;

static const write_case_t write_bad[] = {
    {"NaN cosine", {{"a", 1, 1, NAN, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"infinite error", {{"a", 1, 1, 0.5, 0.5, INFINITY, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"cosine above 1", {{"a", 1, 1, 1.0001, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"negative error", {{"a", 1, 1, 0.5, 0.5, -0.001, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"space in segment", {{"fc 1", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"empty segment", {{"", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"NULL segment", {{NULL, 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 1},
    {"route pmpi", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_PMPI, NAN, -1.0, PROF_INTS}}, 1},
    {"route out of range", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_COUNT, NAN, -1.0, PROF_INTS}}, 1},
    {"duplicate segment", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}, {"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, PROF_INTS}}, 2},
    {"v2 entry: NaN integer columns", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0,
                                        {NAN, NAN, NAN}, {NAN, NAN, NAN}}}, 1},
    {"NaN int4 cosine", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, {NAN, 0.5, 0.5}, {0.5, 0.5, 0.5}}}, 1},
    {"int2 cosine below -1", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_FP32, NAN, -1.0, {0.5, 0.5, -1.5}, {0.5, 0.5, 0.5}}}, 1},
    {"infinite int3 error", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_INT4, NAN, -1.0, {0.5, 0.5, 0.5}, {0.5, INFINITY, 0.5}}}, 1},
    {"negative int4 error", {{"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_INT4, NAN, -1.0, {0.5, 0.5, 0.5}, {-0.001, 0.5, 0.5}}}, 1},
};

START_TEST(test_profile_write_refuses)
{
    const write_case_t *c = &write_bad[_i];
    char *text;
    int rc, err;

    text = profile_text(c->e, c->n, &rc, &err);
    ck_assert_msg(rc == NF_ERR_INVALID && err == EINVAL, "%s: rc %d errno %d", c->what, rc, err);
    ck_assert_msg(text[0] == '\0', "%s: wrote %s", c->what, text);
    free(text);
}
END_TEST

START_TEST(test_profile_write_errors)
{
    nf_profile_entry_t e = {"a", 1, 1, 0.5, 0.5, 0.5, 0.5, NF_ROUTE_BINARY, NAN, -1.0, PROF_INTS};
    nf_profile_t *p;
    diags_t g;
    char *text;
    int rc, err;
    FILE *full;

    /* No entries: the header lines, and a profile that loads empty. */
    text = profile_text(NULL, 0, &rc, &err);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(text, PROF_HDR3 PROF_COLS3);
    ck_assert_int_eq(profile(text, strlen(text), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_profile_count(p), 0);
    nf_profile_free(p);
    free(text);
    errno = 0;
    ck_assert_int_eq(nf_profile_write(NULL, &e, 1), NF_ERR_INVALID);
    ck_assert_int_eq(errno, EINVAL);
    /* A full disk is a write error with its errno. */
    full = fopen("/dev/full", "w");
    if (full != NULL) {
        errno = 0;
        ck_assert_int_eq(nf_profile_write(full, &e, 1), NF_ERR_IO);
        ck_assert_int_eq(errno, ENOSPC);
        fclose(full);
    }
}
END_TEST

/* Written under a decimal-comma locale, still read back. Runs where such a
 * locale is installed (de_DE.UTF-8 and the like); elsewhere says so. */
START_TEST(test_profile_write_locale)
{
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8", "nl_NL.UTF-8"};
    nf_profile_entry_t e = {"a", 1, 1, 0.5, 0.25, 0.125, 1.5, NF_ROUTE_INT4, -0.5, 0.25, {0.5, 0.25, -0.125},
                            {0.0625, 1.5, 2.25}};
    const char *used = NULL;
    char *text;
    int rc, err;

    for (size_t i = 0; i < NELEM(names) && used == NULL; i++)
        if (setlocale(LC_NUMERIC, names[i]) != NULL)
            used = names[i];
    if (used == NULL)
        fprintf(stderr, "test_profile_write_locale: no decimal-comma locale installed; checked in C only\n");
    text = profile_text(&e, 1, &rc, &err);
    setlocale(LC_NUMERIC, "C");
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(text, "\na 1 1 0.5000 0.2500 0.1250 1.5000 int4 -0.5000 0.2500 0.5000 0.2500 -0.1250 "
                               "0.0625 1.5000 2.2500\n") != NULL, "%s wrote:\n%s",
                  used ? used : "C", text);
    free(text);
}
END_TEST

START_TEST(test_profile_files)
{
    nf_profile_t *p = NULL;
    nf_policy_t *pol = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_profile_load("/nonexistent/x.profile", collect, &g, &p), NF_ERR_IO);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(g.text, "/nonexistent/x.profile:0: cannot open profile: No such file") != NULL, "got %s",
                  g.text);
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_profile_load("/dev/zero", collect, &g, &p), NF_ERR_IO);
    ck_assert_msg(strstr(g.text, "/dev/zero:0: cannot read profile: not a regular file") != NULL, "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_profile_load(fixture("bad_header.profile"), collect, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "bad_header.profile:1: not a libnfcoll profile: the first line must be "
                                 "'# libnfcoll profile v3', '# libnfcoll profile v2' or '# libnfcoll profile v1' "
                                 "(found '# libnfcoll profile v4')") != NULL, "got %s", g.text);
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_profile_load(fixture("dup.profile"), collect, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "dup.profile:6: duplicate segment 'fc1.weight' (first at line 3)") != NULL, "got %s",
                  g.text);
    ck_assert_ptr_null(p);

    /* The policy's relative `profile` path finds the fixture next to it;
     * every region of model.layout has an entry. */
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("model.policy"), collect, &g, &pol), NF_OK);
    ck_assert_int_eq(nf_profile_load(nf_policy_profile(pol), collect, &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "model.profile should be clean, got %s", g.text);
    ck_assert_uint_eq(nf_profile_count(p), 7);
    ck_assert_int_eq(nf_profile_find(p, "fc1.weight")->route, NF_ROUTE_BINARY);
    ck_assert_int_eq(nf_profile_find(p, "fc1.bias")->route, NF_ROUTE_TERNARY);
    ck_assert_int_eq(nf_profile_find(p, "head.weight")->route, NF_ROUTE_FP32);
    ck_assert_int_eq(nf_profile_find(p, "buffer:4096")->route, NF_ROUTE_BINARY);
    /* A v1 profile loads with the routes it names, but its entries have no
     * int4 cosine: calibration would now admit nothing on them. */
    for (size_t i = 0; i < nf_profile_count(p); i++) {
        const nf_profile_entry_t *e = nf_profile_entry(p, i);
        ck_assert_msg(isnan(e->cos_int[0]) && nf_profile_choose(e, nf_policy_admit_cosine(pol)) == NF_ROUTE_FP32,
                      "%s", e->segment);
    }
    nf_profile_free(p);
    /* A v3 profile as calibration writes it at the policy's admit_cosine
     * (0.8): int4 where cos_int4 reaches it, fp32 elsewhere, whatever the
     * other routes' cosines; no decay on an int4 entry. */
    static const char v3[] = PROF_HDR3 PROF_COLS3
        "fc1.weight 200704 10 0.9312 0.9501 0.3671 0.3102 int4 0.1843 - 0.9954 0.9801 0.9102 0.0961 0.1990 0.4143\n"
        "fc1.bias 256 10 0.2000 0.3000 0.9000 0.8000 int4 - - 0.8000 0.6000 0.4000 0.6000 0.8000 0.9000\n"
        "head.weight 1280 10 0.9900 0.9900 0.1000 0.1000 fp32 -0.2000 1.0000 0.7999 0.9900 0.9900 0.6 0.1 0.1\n";
    ck_assert_int_eq(profile(v3, strlen(v3), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_profile_count(p), 3);
    for (size_t i = 0; i < nf_profile_count(p); i++) {
        const nf_profile_entry_t *e = nf_profile_entry(p, i);
        ck_assert_msg(nf_profile_choose(e, nf_policy_admit_cosine(pol)) == e->route, "%s", e->segment);
        ck_assert_msg(e->route != NF_ROUTE_INT4 || e->ef_decay < 0, "%s", e->segment);
    }
    ck_assert_int_eq(nf_profile_find(p, "head.weight")->route, NF_ROUTE_FP32);
    ck_assert(nf_profile_find(p, "fc1.weight")->cos_int[2] == 0.9102 &&
              nf_profile_find(p, "fc1.weight")->relerr_int[1] == 0.1990);
    nf_profile_free(p);
    nf_policy_free(pol);
}
END_TEST

/* ------------------------------------------------- the routing decision */

/* One policy, layout and profile for every case (nf_decide.h); each case
 * also checks the reason the decision gives beside the route (the whole
 * call's and, cut, each segment's): rule, profile, no-entry, stale-entry,
 * calibrate. */
static const char decide_policy[] =
    "[policy]\nversion = 1\n\n"
    "[rule whole]\ncomm = keep\nsegment = buffer\nroute = binary\n\n"
    "[rule frozen]\nregion = frozen*\nroute = pmpi\n\n"
    "[rule head]\nregion = head.*\nroute = ternary\n\n"
    "[rule bytes]\ndatatype = float\nop = sum\nbytes = 1M-\nroute = bf16\n\n"
    "[rule model]\ndatatype = float\nop = sum\nroute = auto\n\n"
    "[default]\nroute = pmpi\n";
/* Calls of 400 bytes are cut: a region at 10 (20 floats) and one at 50. */
static const char decide_layout[] = "400 head.w 10 20\n400 frozen.b 50 10\n400 bad 95 10\n";
static const char decide_profile[] =
    "# libnfcoll profile v1\n"
    "buffer:40 10 10 0.9 0.9 0.3 0.3 binary\n"      /* the first gap of a cut call */
    "buffer:80 20 10 0.9 0.9 0.3 0.3 ternary\n"     /* a whole call of 20 floats */
    "buffer:16 5 10 0.9 0.9 0.3 0.3 binary\n"       /* measured on 5 floats: stale */
    "w 8 10 0.9 0.9 0.3 0.3 binary\n";              /* a bound region of 8 floats */

typedef struct decide_case {
    const char *what, *comm;
    int comm_size, comm_ok, calibrate;
    nf_dtype_t dt;
    nf_opkind_t op;
    uint64_t count;           /* elements; bytes = 4 x count for float, 8 x for double */
    const char *parts;        /* "NAME OFF M;..." bound regions, or NULL */
    int cut;
    nf_route_t route;         /* of the whole call */
    const char *segs;         /* "OFF:M:ROUTE:RULE ..." (NAME omitted), or NULL */
    int stale;
    const char *why;          /* the whole call's reason, "/" and the segments' */
} decide_case_t;

static const decide_case_t decide_cases[] = {
    {"a whole float sum, route = auto from buffer:80", "w", 2, 1, 0, NF_DT_FLOAT, NF_OP_SUM,
     20, NULL, 0, NF_ROUTE_TERNARY, NULL, 0, "profile"},
    {"route = auto without an entry: fp32", "w", 2, 1, 0, NF_DT_FLOAT, NF_OP_SUM, 21, NULL, 0,
     NF_ROUTE_FP32, NULL, 0, "no-entry"},
    {"route = auto, an entry of another element count: fp32, said", "w", 2, 1, 0, NF_DT_FLOAT,
     NF_OP_SUM, 4, NULL, 0, NF_ROUTE_FP32, NULL, 1, "stale-entry"},
    {"a double sum is not a float sum: default pmpi", "w", 2, 1, 0, NF_DT_DOUBLE, NF_OP_SUM, 100,
     NULL, 0, NF_ROUTE_PMPI, NULL, 0, "rule"},
    {"a big float sum: bf16, not cut", "w", 2, 1, 0, NF_DT_FLOAT, NF_OP_SUM, 1u << 18, NULL, 0,
     NF_ROUTE_BF16, NULL, 0, "rule"},
    {"cut by the layout: gaps, regions, a part past the end left out", "w", 2, 1, 0,
     NF_DT_FLOAT, NF_OP_SUM, 100, NULL, 1, NF_ROUTE_FP32,
     "0:10:binary:model 10:20:ternary:head 30:20:ternary:model 50:10:pmpi:frozen 60:40:fp32:model", 0, "rule/profile rule profile rule no-entry"},
    {"segment = buffer keeps the call whole", "keep", 2, 1, 0, NF_DT_FLOAT, NF_OP_SUM, 100, NULL,
     0, NF_ROUTE_BINARY, NULL, 0, "rule"},
    {"bound parts win over the layout; a pmpi region keeps the call fused", "w", 2, 1, 0,
     NF_DT_FLOAT, NF_OP_SUM, 100, "frozen 0 50;w 50 8", 1, NF_ROUTE_FP32,
     "0:50:pmpi:frozen 50:8:binary:model 58:42:fp32:model", 0, "rule/rule profile no-entry"},
    {"every segment pmpi: whole on pmpi", "w", 2, 1, 0, NF_DT_FLOAT, NF_OP_SUM, 100,
     "frozen.a 0 60;frozen.b 60 40", -1, NF_ROUTE_PMPI, "0:60:pmpi:frozen 60:40:pmpi:frozen", 0, "rule/rule rule"},
    {"one rank: pmpi, whatever the cut", "w", 1, 0, 0, NF_DT_FLOAT, NF_OP_SUM, 100, NULL, 1,
     NF_ROUTE_PMPI, NULL, 0, "rule/profile rule profile rule no-entry"},
    {"a calibration run: fp32", "w", 2, 1, 1, NF_DT_FLOAT, NF_OP_SUM, 20, NULL, 0, NF_ROUTE_FP32,
     NULL, 0, "calibrate"},
    {"a calibration run does not take a double sum", "w", 2, 1, 1, NF_DT_DOUBLE, NF_OP_SUM, 20,
     NULL, 0, NF_ROUTE_PMPI, NULL, 0, "rule"},
    {"a calibration run: a cut call's segments are calibrate", "w", 2, 1, 1, NF_DT_FLOAT,
     NF_OP_SUM, 100, NULL, 1, NF_ROUTE_FP32,
     "0:10:binary:model 10:20:ternary:head 30:20:ternary:model 50:10:pmpi:frozen 60:40:fp32:model", 0,
     "calibrate/calibrate calibrate calibrate calibrate calibrate"},
};

static void decide_parts(const char *spec, nf_decide_part_t *p, char names[][16], size_t *n)
{
    *n = 0;
    while (spec != NULL && *spec != '\0') {
        unsigned long long off, m;
        int used = 0;
        ck_assert_int_eq(sscanf(spec, "%15s %llu %llu;%n", names[*n], &off, &m, &used), 3);
        p[*n] = (nf_decide_part_t){off, m, names[*n]};
        (*n)++;
        spec += used ? used : (int)strlen(spec);
    }
}

START_TEST(test_decide)
{
    const decide_case_t *c = &decide_cases[_i];
    diags_t g;
    nf_policy_t *pol;
    nf_layout_t *lay;
    nf_profile_t *prof;
    ck_assert_int_eq(parse(decide_policy, strlen(decide_policy), &g, &pol), NF_OK);
    ck_assert_int_eq(layout(decide_layout, strlen(decide_layout), &g, &lay), NF_OK);
    ck_assert_int_eq(profile(decide_profile, strlen(decide_profile), &g, &prof), NF_OK);
    nf_decide_ctx_t x = {.pol = pol, .layout = lay, .prof = prof, .calibrate = c->calibrate,
                         .count_bits = 16};
    nf_decide_part_t parts[8];
    char names[8][16];
    size_t np;
    decide_parts(c->parts, parts, names, &np);
    uint64_t size = c->dt == NF_DT_DOUBLE ? 8 : 4;
    nf_decide_call_t call = {.comm_name = c->comm, .comm_size = c->comm_size, .dt = c->dt,
                             .op = c->op, .bytes = size * c->count, .count = c->count,
                             .parts = parts, .nparts = np};
    nf_decide_t d = {0};
    ck_assert_int_eq(nf_decide(&x, &call, c->comm_ok, &d), NF_OK);
    ck_assert_msg(d.cut == c->cut && d.route == c->route, "%s: cut %d route %s, expected %d %s",
                  c->what, d.cut, nf_route_name(d.route), c->cut, nf_route_name(c->route));
    ck_assert_msg((d.stale != NULL) == c->stale, "%s: stale %p", c->what, (void *)d.stale);
    char why[256];
    snprintf(why, sizeof(why), "%s%s", nf_decide_why_name(d.why.why), d.cut ? "/" : "");
    for (size_t i = 0; d.cut && i < d.nseg; i++) {
        size_t at = strlen(why);
        snprintf(why + at, sizeof(why) - at, "%s%s", i ? " " : "",
                 nf_decide_why_name(d.seg[i].why.why));
        /* the entry comes with the reasons that read one */
        ck_assert((d.seg[i].why.pe != NULL) ==
                  (d.seg[i].why.why == NF_WHY_PROFILE || d.seg[i].why.why == NF_WHY_STALE));
    }
    ck_assert_msg(strcmp(why, c->why) == 0, "%s: why '%s', expected '%s'", c->what, why, c->why);
    if (c->segs != NULL) {
        char got[512] = "";
        for (size_t i = 0; i < d.nseg; i++) {
            size_t at = strlen(got);
            snprintf(got + at, sizeof(got) - at, "%s%llu:%llu:%s:%s", i ? " " : "",
                     (unsigned long long)d.seg[i].off, (unsigned long long)d.seg[i].m,
                     nf_route_name(d.seg[i].route), d.seg[i].act.rule);
        }
        ck_assert_msg(strcmp(got, c->segs) == 0, "%s: segments '%s', expected '%s'", c->what,
                      got, c->segs);
    }
    nf_decide_free(&d);
    nf_profile_free(prof);
    nf_layout_free(lay);
    nf_policy_free(pol);
}
END_TEST

/* What the runner makes of a route: pmpi for what fp32 cannot take, fp32
 * inside a fused call for pmpi, and for low-bit routes the count lanes
 * cannot hold. */
START_TEST(test_decide_runs)
{
    nf_decide_ctx_t x = {.count_bits = 1}; /* 4 ranks need 3 planes */
    nf_decide_call_t f = {.comm_size = 2, .dt = NF_DT_FLOAT, .op = NF_OP_SUM, .bytes = 40,
                          .count = 10};
    nf_decide_call_t dbl = f;
    dbl.dt = NF_DT_DOUBLE, dbl.bytes = 80;
    ck_assert_int_eq(nf_decide_runs(&x, &dbl, 0, NF_ROUTE_FP32), NF_ROUTE_PMPI);
    ck_assert_int_eq(nf_decide_runs(&x, &f, 1, NF_ROUTE_PMPI), NF_ROUTE_FP32);
    ck_assert_int_eq(nf_decide_runs(&x, &f, 0, NF_ROUTE_BF16), NF_ROUTE_BF16);
    x.count_bits = 1;
    f.comm_size = 4;
    ck_assert_int_eq(nf_decide_runs(&x, &f, 0, NF_ROUTE_BINARY), NF_ROUTE_FP32);
    x.count_bits = 16;
    ck_assert_int_eq(nf_decide_runs(&x, &f, 0, NF_ROUTE_BINARY), NF_ROUTE_BINARY);
    x.calibrate = 1;
    ck_assert_int_eq(nf_decide_runs(&x, &f, 1, NF_ROUTE_TERNARY), NF_ROUTE_FP32);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *t = tcase_create("parse");

    tcase_add_loop_test(t, test_malformed, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(t, test_bad_rule_rest_loads);
    tcase_add_test(t, test_lowbit_real_clean);
    tcase_add_test(t, test_long_lines);
    tcase_add_test(t, test_too_many_rules);
    tcase_add_test(t, test_files);
    tcase_add_loop_test(t, test_special_files, 0,
                        (int)(sizeof(special_cases) / sizeof(special_cases[0])));
    tcase_add_test(t, test_settings);
    tcase_add_loop_test(t, test_names, 0, (int)(sizeof(name_cases) / sizeof(name_cases[0])));
    suite_add_tcase(s, t);
    t = tcase_create("decide");
    tcase_add_loop_test(t, test_decide, 0, (int)NELEM(decide_cases));
    tcase_add_test(t, test_decide_runs);
    suite_add_tcase(s, t);
    t = tcase_create("match");
    tcase_add_loop_test(t, test_match, 0, (int)(sizeof(match_cases) / sizeof(match_cases[0])));
    tcase_add_test(t, test_actions);
    tcase_add_test(t, test_explain);
    tcase_add_test(t, test_ef_decay);
    tcase_add_test(t, test_scale_block);
    tcase_add_test(t, test_block);
    tcase_add_test(t, test_int_routes);
    tcase_add_test(t, test_hash);
    tcase_add_loop_test(t, test_route_auto, 0, (int)(sizeof(auto_cases) / sizeof(auto_cases[0])));
    tcase_add_test(t, test_route_auto_explain_hash);
    tcase_add_test(t, test_warmup);
    suite_add_tcase(s, t);
    t = tcase_create("model settings");
    tcase_add_test(t, test_model_defaults);
    tcase_add_test(t, test_model_values);
    tcase_add_test(t, test_health_keys);
    tcase_add_loop_test(t, test_model_paths, 0, (int)(sizeof(path_cases) / sizeof(path_cases[0])));
    tcase_add_test(t, test_model_paths_load);
    tcase_add_test(t, test_model_hash);
    suite_add_tcase(s, t);
    t = tcase_create("layout");
    tcase_add_loop_test(t, test_layout_lines, 0, (int)(sizeof(layout_cases) / sizeof(layout_cases[0])));
    tcase_add_test(t, test_layout_find);
    tcase_add_test(t, test_layout_hash);
    tcase_add_test(t, test_layout_files);
    tcase_add_test(t, test_layout_many);
    suite_add_tcase(s, t);
    t = tcase_create("profile");
    tcase_add_loop_test(t, test_profile_lines, 0, (int)NELEM(profile_cases));
    tcase_add_test(t, test_profile_find);
    tcase_add_test(t, test_profile_find_many);
    tcase_add_test(t, test_profile_hash);
    tcase_add_test(t, test_profile_hash_v3);
    tcase_add_loop_test(t, test_profile_choose, 0, (int)NELEM(choose_cases));
    tcase_add_test(t, test_profile_round_trip);
    tcase_add_test(t, test_profile_round_trip_rounding);
    tcase_add_test(t, test_profile_decay);
    tcase_add_loop_test(t, test_profile_write_refuses, 0, (int)NELEM(write_bad));
    tcase_add_test(t, test_profile_write_errors);
    tcase_add_test(t, test_profile_write_locale);
    tcase_add_test(t, test_profile_files);
    suite_add_tcase(s, t);
    t = tcase_create("cache keys");
    tcase_add_test(t, test_size_class);
    tcase_add_test(t, test_size_class_bounds);
    tcase_add_loop_test(t, test_calls_settled, 0, (int)(sizeof(settled_cases) / sizeof(settled_cases[0])));
    tcase_add_loop_test(t, test_cache_keys_random, 0, 64);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(policy_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
