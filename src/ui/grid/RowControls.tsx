// Sort and filter of the grid's rows: a sort key (the batch's own order, or one value per sample — only the
// keys the batch on screen has values for are offered), its direction, and "rows with findings". The order
// itself is derived in the store (src/store/rows.ts); the grid, its labels and its keyboard walk follow it.
import { useStudio } from '../../store/index.ts';
import { SORT_LABELS, sortKeysOf } from '../../store/rows.ts';
import type { SortKey } from '../../store/layout.ts';

export function RowControls({ shown, total }: { shown: number; total: number }) {
  const sort = useStudio((s) => s.rowSort);
  const set = useStudio((s) => s.setRowSort);
  const keys = useStudio(sortKeysOf)
    .split(',')
    .filter(Boolean) as SortKey[];
  const key = sort.key && keys.includes(sort.key) ? sort.key : '';
  return (
    <span className="row-controls" data-testid="row-controls">
      <label>
        rows{' '}
        <select value={key} data-testid="row-sort" onChange={(e) => set({ key: (e.target.value || null) as SortKey | null })}>
          <option value="">batch order</option>
          {keys.map((k) => (
            <option key={k} value={k} title={SORT_LABELS[k].title}>
              by {SORT_LABELS[k].label}
            </option>
          ))}
        </select>
      </label>
      <button className="toggle" data-testid="row-sort-dir" aria-pressed={sort.descending} disabled={!key} title="sort direction" onClick={() => set({ descending: !sort.descending })}>
        {sort.descending ? '↓ desc' : '↑ asc'}
      </button>
      <button className="toggle" data-testid="row-filter-findings" aria-pressed={sort.findingsOnly} title="show only the rows a Doctor finding names" onClick={() => set({ findingsOnly: !sort.findingsOnly })}>
        with findings
      </button>
      {shown !== total && (
        <span className="muted" data-testid="rows-shown">
          {shown} of {total} rows
        </span>
      )}
    </span>
  );
}
