#!/usr/bin/env bash
# Runs on a lent GPU machine (the `device` tool), over the kit scripts/device-kit.ts packed: unpacks Node and
# Dawn, brings the Vulkan loader if the image lacks one, then runs bench suites one process each under one
# deadline, so a suite that hangs or runs long costs its own slot and not the lease. Each entry of SUITES is
# BUNDLE:SUITE:SECONDS (BUNDLE a folder of .devkit/: head, or a commit packed with --ref). Everything lands in
# $OUT: log.txt (the tables as printed) and results.json ({ "BUNDLE:SUITE": what `npm run bench --json` writes });
# a suite's JSON that cannot be read stays beside them as part-BUNDLE-SUITE.json.
# BUDGET (seconds, default 500) is the whole run's deadline; QUICK=1 passes --quick.
set -uo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
start=$(date +%s)
BUDGET=${BUDGET:-500}
exec > >(tee -a "$OUT/log.txt") 2>&1
tee_pid=$!

# Not `grep -q`: it exits at the first match, and under pipefail ldconfig's SIGPIPE would read as "no loader".
if ! ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null; then
  debs=(.devkit/gl/*.deb)
  [ ${#debs[@]} -gt 0 ] || echo "device-run: no Vulkan loader here and none in .devkit/gl"
  for f in "${debs[@]}"; do dpkg -x "$f" / || echo "device-run: dpkg -x $f failed"; done
  ldconfig || echo "device-run: ldconfig failed"
fi
nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
# Both names: loaders before 1.3.207 read only VK_ICD_FILENAMES.
[ -e "$nv" ] && export VK_DRIVER_FILES=$nv VK_ICD_FILENAMES=$nv
rt=/tmp/devkit-runtime
mkdir -p "$rt" && tar -xJf .devkit/runtime.tar.xz -C "$rt" || { echo "device-run: cannot unpack .devkit/runtime.tar.xz"; exit 2; }
ln -sfn "$rt/node_modules" .devkit/node_modules # the bundles resolve `webgpu` from here
# Timestamps at full resolution (Dawn quantizes them by default).
export GRPO_STUDIO_DAWN_FLAGS=${GRPO_STUDIO_DAWN_FLAGS-disable-dawn-features=timestamp_quantization}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "node $("$rt/bin/node" --version); suites: ${SUITES:?SUITES is empty}"

for spec in $SUITES; do
  IFS=: read -r name suite secs <<<"$spec"
  if ! [[ $secs =~ ^[1-9][0-9]*$ && -f .devkit/$name/run.mjs ]]; then echo "== $spec: skipped, not BUNDLE:SUITE:SECONDS with a bundle in .devkit/"; continue; fi
  left=$((BUDGET - ($(date +%s) - start)))
  if [ "$left" -lt 15 ]; then echo "== $spec: skipped, ${left} s left"; continue; fi
  t=$((secs < left ? secs : left))
  echo "== $spec (limit $t s)"
  timeout -k 5 "$t" "$rt/bin/node" --expose-gc ".devkit/$name/run.mjs" --only "$suite" ${QUICK:+--quick} --json "$OUT/part-$name-$suite.json"
  echo "== $spec: exit $? after $(($(date +%s) - start)) s"
done

"$rt/bin/node" -e '
const fs = require("fs"), path = require("path");
const dir = process.argv[1], merged = {}, read = [];
for (const f of fs.readdirSync(dir).filter((f) => /^part-[^-]+-.+\.json$/.test(f)).sort()) {
  const [, name, suite] = f.match(/^part-([^-]+)-(.+)\.json$/);
  try {
    merged[`${name}:${suite}`] = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
    read.push(f);
  } catch (e) {
    console.log(`${f}: not read (${e.message}); left in place`);
  }
}
fs.writeFileSync(path.join(dir, "results.json"), JSON.stringify(merged, null, 1) + "\n");
for (const f of read) fs.unlinkSync(path.join(dir, f));
console.log(`results.json: ${Object.keys(merged).join(", ") || "nothing"}`);
' "$OUT"

# Let tee write the last lines before the tool collects $OUT.
exec >&- 2>&-
wait "$tee_pid"
