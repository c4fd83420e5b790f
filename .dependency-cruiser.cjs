// The import rules of src/ (and bench/), checked by tests/dependency_rule.test.ts in `npm test`.
// Layers flow one way, as the data does: io / tokenize → grpo → model → kernels → gpu, and
// ui → store → worker. In imports: gpu imports nothing of ours; kernels only gpu; model only kernels,
// gpu and io (safetensors); grpo may use all of these and tokenize. io and tokenize are where input
// enters: they parse and render and import none of the layers that consume them (so any layer may read
// a parsed batch without a cycle). The Doctor sits above io and grpo; the worker runs grpo, model and
// the Doctor; the store talks to the worker; the page reads the store; the CLI uses everything but the page.
// src/ref/ is the float64 test oracle: tests and bench import it, production never does.
// Type-only imports count (tsPreCompilationDeps), except where a rule says otherwise: the page may name
// the worker's message types, which carry no code.
// src/grpo/settings/ (the settings table), src/grpo/default_task.ts and src/kernels/types.ts (loss types,
// aggregation names, clip flags) are declarative: the store reads them for its forms' state and re-exports
// what the page shows (src/store/vocabulary.ts), so the page still imports only the store.

/** src/<dir>/ as a path regex. */
const dir = (...names) => `^src/(${names.join('|')})/`;

/** Settings tables, the default task and the shared kernel constants: names, defaults, flags; no computation. */
const DECLARATIVE = '^src/(grpo/settings/|grpo/default_task\\.ts$|kernels/types\\.ts$)';

const BELOW_PAGE = ['worker', 'doctor', 'grpo', 'model', 'kernels', 'gpu', 'io', 'tokenize'];

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'no import cycles, type-only ones included', from: {}, to: { circular: true } },
    {
      name: 'no-ref-in-production',
      severity: 'error',
      comment: 'src/ref is the test oracle: only tests, bench and other twins import it',
      from: { path: '^src/', pathNot: '^src/ref/' },
      to: { path: '^src/ref/' },
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
      comment: 'grpo may use model, kernels, gpu, io and tokenize; never doctor, worker, store, ui or cli',
      from: { path: dir('grpo') },
      to: { path: dir('doctor', 'worker', 'store', 'ui', 'cli') },
    },
    {
      name: 'ingestion-is-the-top',
      severity: 'error',
      comment: 'io and tokenize parse input; they import nothing from the layers that consume it (the shared constants aside: a validator checks names against them)',
      from: { path: dir('io', 'tokenize') },
      to: { path: dir('grpo', 'model', 'kernels', 'gpu', 'doctor', 'worker', 'store', 'ui', 'cli'), pathNot: '^src/kernels/types\\.ts$' },
    },
    {
      name: 'doctor-below-the-apps',
      severity: 'error',
      comment: 'the Doctor checks batches: io, grpo, tokenize; never the GPU stack or the apps',
      from: { path: dir('doctor') },
      to: { path: dir('model', 'kernels', 'gpu', 'worker', 'store', 'ui', 'cli') },
    },
    {
      name: 'worker-below-the-page',
      severity: 'error',
      from: { path: dir('worker') },
      to: { path: dir('store', 'ui', 'cli') },
    },
    {
      name: 'store-talks-to-the-worker',
      severity: 'error',
      comment: 'the store runs nothing itself: it asks the worker; it reads parsed batches (io) and the declarative defaults',
      from: { path: dir('store') },
      to: { path: dir('doctor', 'grpo', 'model', 'kernels', 'gpu', 'tokenize'), pathNot: DECLARATIVE, dependencyTypesNot: ['type-only'] },
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
    { name: 'cli-is-headless', severity: 'error', from: { path: dir('cli') }, to: { path: dir('ui', 'store') } },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    moduleSystems: ['es6', 'cjs'],
  },
};
