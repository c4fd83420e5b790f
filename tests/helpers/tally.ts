// Records the worst fraction of tolerance each check used, per label, and prints the table after a
// test file: the numbers a kernel report quotes (how much headroom each tolerance leaves).
import { afterAll } from 'vitest';
import { expectClose, type CloseOptions, type CloseReport } from './close.ts';

export function tally(title: string) {
  const worst = new Map<string, number>();
  afterAll(() => {
    const rows = [...worst].map(([k, v]) => `  ${k.padEnd(44)} ${v.toExponential(2)}`);
    console.log(`${title}: worst fraction of tolerance\n${rows.join('\n')}`);
  });
  /** expectClose, remembering the worst fraction under `key` (defaults to the label). */
  return (actual: ArrayLike<number>, expected: ArrayLike<number>, o: CloseOptions & { key?: string }): CloseReport => {
    const r = expectClose(actual, expected, o);
    const key = o.key ?? o.label ?? '?';
    worst.set(key, Math.max(worst.get(key) ?? 0, r.worst));
    return r;
  };
}
