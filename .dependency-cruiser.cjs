// The import rules of src/ (and bench/), checked by tests/dependency_rule.test.ts in `npm test`.
// Layers flow one way, as the data does: io / tokenize → grpo → model → kernels → gpu, and
// ui → store → bridge ← worker. In imports: gpu imports nothing of ours; kernels only gpu; model only
// kernels, gpu and io (safetensors); grpo may use all of these and tokenize. io and tokenize are where input
// enters: they parse and render and import none of the layers that consume them (so any layer may read
// a parsed batch without a cycle). The Doctor sits above io and grpo; the worker runs grpo, model and
// the Doctor. src/bridge/ is the page ↔ worker contract (protocol, error categories, the packed rows codec,
// the settings resolution) and the page's end of it (client.ts): the store and the worker both import it,
// it imports neither. The store reaches the worker only through it: it starts the worker by its entry's URL
// (`new URL('../worker/studio.worker.ts', import.meta.url)`, which Vite bundles and no import rule sees) and
// imports nothing of src/worker/, not even a type. The worker imports the contract, never the client. The
// bridge computes nothing of the engine: below it, it imports values only from the declarative modules, io
// and three import-free leaves it re-exports for the page (CONTRACT_VALUES), and only the types of the rest.
// The page reads the store; the CLI uses everything but the page, and reaches neither the page nor the
// store through anything it imports. src/view/ is what the page and the saved report (src/report/) both
// draw: the grid's cells, colours and region names, pure (it reads io's batch and nothing else: no React,
// no DOM), so the report renders in Node without the page.
// src/oracle/ is the float64 test oracle: tests and bench import it, production never does.
// Type-only imports count (tsPreCompilationDeps), except where a rule says otherwise: the page may name
// the bridge's message types, which carry no code, and the bridge may name the types of the layers below.
// src/grpo/settings/ (the settings table), src/grpo/default_task.ts and src/kernels/types.ts (loss types,
// aggregation names, clip flags) and src/model/lora_fields.ts (a new LoRA adapter's fields) are declarative:
// the store reads them for its forms' state and re-exports what the page shows (src/store/vocabulary.ts),
// so the page still imports only the store.

/** src/<dir>/ as a path regex. */
const dir = (...names) => `^src/(${names.join('|')})/`;

/** Settings tables, the default task and the shared kernel constants: names, defaults, flags; no computation. */
const DECLARATIVE = '^src/(grpo/settings/|grpo/default_task\\.ts$|grpo/tool_task\\.ts$|grpo/tasks\\.ts$|grpo/tool_ways\\.ts$|kernels/types\\.ts$|model/lora_fields\\.ts$)';

/**
 * Import-free leaves below the bridge whose values the page needs, re-exported by src/bridge/: the stage list
 * (grpo/stages.ts), the effective mask's factor names (grpo/trainers/effective_mask.ts) and the sampler's
 * defaults (model/sampler.ts, pure logits processing).
 */
const CONTRACT_VALUES = '^src/(grpo/stages\\.ts|grpo/trainers/effective_mask\\.ts|model/sampler\\.ts)$';

const BELOW_PAGE = ['bridge', 'worker', 'doctor', 'grpo', 'model', 'kernels', 'gpu', 'io', 'tokenize'];

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'no import cycles, type-only ones included', from: {}, to: { circular: true } },
    {
      name: 'no-oracle-in-production',
      severity: 'error',
      comment: 'src/oracle is the test oracle: only tests, bench and other twins import it',
      from: { path: '^src/', pathNot: '^src/oracle/' },
      to: { path: '^src/oracle/' },
    },
    { name: 'gpu-is-the-bottom', severity: 'error', comment: 'gpu imports nothing of ours', from: { path: dir('gpu') }, to: { path: '^src/', pathNot: dir('gpu') } },
    {
      name: 'kernels-only-gpu',
      severity: 'error',
      comment: 'kernel launchers use the GPU layer and kernels/types.ts only',
      from: { path: dir('kernels') },
      to: { path: '^src/', pathNot: dir('kernels', 'gpu') },
    },
    {
      name: 'model-below-grpo',
      severity: 'error',
      comment: 'the model runs kernels and reads weights (io/safetensors); it knows nothing of GRPO',
      from: { path: dir('model') },
      to: { path: '^src/', pathNot: dir('model', 'kernels', 'gpu', 'io') },
    },
    {
      name: 'grpo-below-the-apps',
      severity: 'error',
      comment: 'grpo may use model, kernels, gpu, io and tokenize; never doctor, bridge, worker, store, ui or cli',
      from: { path: dir('grpo') },
      to: { path: dir('doctor', 'bridge', 'worker', 'store', 'ui', 'cli') },
    },
    {
      name: 'ingestion-is-the-top',
      severity: 'error',
      comment: 'io and tokenize parse input; they import nothing from the layers that consume it (the shared constants and the settings tables aside: readers carry and validators check every field a table names)',
      from: { path: dir('io', 'tokenize') },
      to: { path: dir('grpo', 'model', 'kernels', 'gpu', 'doctor', 'bridge', 'worker', 'store', 'ui', 'cli'), pathNot: '^src/(kernels/types\\.ts$|grpo/settings/)' },
    },
    {
      name: 'doctor-below-the-apps',
      severity: 'error',
      comment: 'the Doctor checks batches: io, grpo, tokenize; never the GPU stack or the apps',
      from: { path: dir('doctor') },
      to: { path: dir('model', 'kernels', 'gpu', 'bridge', 'worker', 'store', 'ui', 'cli') },
    },
    {
      name: 'worker-below-the-page',
      severity: 'error',
      from: { path: dir('worker') },
      to: { path: dir('store', 'ui', 'cli') },
    },
    {
      name: 'worker-never-the-client',
      severity: 'error',
      comment: "the worker imports the contract in src/bridge/, never the page's end of it",
      from: { path: dir('worker') },
      to: { path: '^src/bridge/client\\.ts$' },
    },
    {
      name: 'bridge-imports-neither-end',
      severity: 'error',
      comment: 'the page ↔ worker contract imports neither side of it (worker, store, page) nor the CLI, the view or the report, not even their types',
      from: { path: dir('bridge') },
      to: { path: `${dir('worker', 'store', 'ui', 'cli', 'view', 'report')}|^src/main\\.tsx$` },
    },
    {
      name: 'bridge-runs-nothing',
      severity: 'error',
      comment: 'the bridge names the types of the layers below; their values only from the declarative modules, io and the import-free leaves it re-exports (CONTRACT_VALUES)',
      from: { path: dir('bridge') },
      to: { path: dir('doctor', 'grpo', 'model', 'kernels', 'gpu', 'tokenize'), pathNot: `${DECLARATIVE}|${CONTRACT_VALUES}`, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'store-talks-to-the-worker',
      severity: 'error',
      comment: 'the store runs nothing itself: it asks the worker (through src/bridge/); it reads parsed batches (io) and the declarative defaults',
      from: { path: dir('store') },
      to: { path: dir('doctor', 'grpo', 'model', 'kernels', 'gpu', 'tokenize'), pathNot: DECLARATIVE, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'store-never-imports-the-worker',
      severity: 'error',
      comment: 'the store knows the worker by its contract (src/bridge/) and its entry URL only: no import of src/worker/, not even a type',
      from: { path: dir('store') },
      to: { path: dir('worker') },
    },
    {
      name: 'store-never-imports-the-page',
      severity: 'error',
      from: { path: dir('store') },
      to: { path: dir('ui', 'cli') },
    },
    {
      name: 'ui-reads-the-store',
      severity: 'error',
      comment: 'the page reads the store (it may name the types of the layers below: they carry no code)',
      from: { path: '^src/(ui/|main\\.tsx)' },
      to: { path: dir(...BELOW_PAGE, 'cli'), dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'view-is-pure',
      severity: 'error',
      comment: 'the grid model the page and the report share reads the batch (io) and nothing else: no React, no store, no package',
      from: { path: dir('view') },
      to: { pathNot: dir('view', 'io') },
    },
    {
      name: 'view-is-for-display',
      severity: 'error',
      comment: 'only the page and the report draw the grid; the layers below them never import it',
      from: { path: dir(...BELOW_PAGE) },
      to: { path: dir('view') },
    },
    {
      name: 'report-below-the-apps',
      severity: 'error',
      comment: 'the report is rendered by the CLI and by the store, in Node as in the page: it never imports the page, the store, the bridge, the worker or the CLI',
      from: { path: dir('report') },
      to: { path: dir('ui', 'store', 'bridge', 'worker', 'cli') },
    },
    {
      name: 'cli-is-headless',
      severity: 'error',
      comment: 'the CLI reaches neither the page nor the store, directly or through any module it imports',
      from: { path: dir('cli') },
      to: { path: dir('ui', 'store'), reachable: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    moduleSystems: ['es6', 'cjs'],
  },
};
