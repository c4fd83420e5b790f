# Writes tests/golden/trainers/verl_dynamic.json: verl's own dynamic micro-batch partitions (use_dynamic_bsz),
# for tests/grpo/verl_dynamic.test.ts. The functions run unchanged: calculate_workload, karmarkar_karp and
# get_seqlen_balanced_partitions are taken from verl/utils/seqlen_balancing.py with `ast` and exec'd (they need
# only heapq; the module's torch imports and annotations are not evaluated). Deterministic (seeded), so re-running reproduces
# the committed bytes.
#   git --git-dir=VERL show b178a3cd56f58b2d502255daba591e92833930a7:verl/utils/seqlen_balancing.py > sb.py
#   python3 scripts/make_verl_dynamic_golden.py sb.py [OUT]
import __future__
import ast
import copy
import heapq
import json
import os
import random
import sys

COMMIT = "b178a3cd56f58b2d502255daba591e92833930a7"
TAKEN = ["calculate_workload", "karmarkar_karp", "get_seqlen_balanced_partitions"]
HERE = os.path.dirname(os.path.abspath(__file__))
src_path = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "tests", "golden", "trainers", "verl_dynamic.json")

tree = ast.parse(open(src_path).read())
found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in TAKEN]
assert sorted(n.name for n in found) == sorted(TAKEN), [n.name for n in found]
ns = {"heapq": heapq, "copy": copy}
# Annotations stay unevaluated (they name torch types).
exec(compile(ast.Module(body=found, type_ignores=[]), src_path, "exec", flags=__future__.annotations.compiler_flag), ns)

rng = random.Random(20261129)
cases = []
for n in range(200):
    # The last 40: four rows, the size of the verl trainer goldens the objective test packs.
    rows = rng.randint(1, 40) if n < 160 else 4
    kind = n % 4
    if kind == 0:  # spread lengths
        lengths = [rng.randint(1, 4096) for _ in range(rows)]
    elif kind == 1:  # few distinct lengths: ties in sums, counts and item lists
        pool = [rng.randint(1, 64) for _ in range(rng.randint(1, 3))]
        lengths = [rng.choice(pool) for _ in range(rows)]
    elif kind == 2:  # all equal
        lengths = [rng.randint(1, 300)] * rows
    else:  # one long row among short ones
        lengths = [rng.randint(1, 32) for _ in range(rows)]
        lengths[rng.randrange(rows)] = rng.randint(2000, 8000)
    k = rng.randint(1, min(rows, 9))
    workloads = [ns["calculate_workload"](x) for x in lengths]
    parts = ns["get_seqlen_balanced_partitions"](workloads, k, equal_size=False)
    cases.append({"lengths": lengths, "k": k, "workloads": workloads, "partitions": parts})

with open(out, "w") as f:
    json.dump({"source": f"volcengine/verl {COMMIT} verl/utils/seqlen_balancing.py", "functions": TAKEN, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(f"{out}: {len(cases)} cases")
