// The import in progress: file name, stage (reading, parsing, Doctor checks, rows to the page) with a bar,
// and a Cancel button that stops it (the file read, or the worker parsing it) and keeps the batch on screen.
import { useImport } from '../../store/import.ts';

export function ImportProgress() {
  const name = useImport((s) => s.name);
  const p = useImport((s) => s.progress);
  const cancel = useImport((s) => s.cancel);
  if (!name || !p) return null;
  const pct = p.total > 0 ? (100 * p.loaded) / p.total : null;
  return (
    <span className="import-progress" data-testid="import-progress">
      <span className="progress" title={name}>
        <span className="bar" style={{ width: pct === null ? '100%' : `${pct}%` }} />
        <span data-testid="import-stage">
          {name}: {p.label}
          {pct !== null ? ` ${pct.toFixed(0)}%` : '…'}
        </span>
      </span>
      {cancel && (
        <button onClick={cancel} data-testid="import-cancel">
          Cancel
        </button>
      )}
    </span>
  );
}
