// How a message echoes a value read from a file, in one place for the readers, the validator and the settings
// tables (a leaf module: anything may import it without a cycle).

/**
 * A value read from JSON as a message shows it: JSON.stringify would show Infinity (what `1e400` parses to) and NaN
 * as null, and an integer past 2^53 is no longer the one the file wrote (9007199254740993 reads as …992), so it is
 * shown as approximate and said to be past exact range rather than echoed as a number the file does not hold. A list
 * shows each element so; no value at all is "absent".
 */
export function shown(v: unknown): string {
  if (v === undefined) return 'absent';
  if (typeof v === 'number') return Math.abs(v) > Number.MAX_SAFE_INTEGER && Number.isFinite(v) ? `about ${v.toExponential()} (beyond 2^53, where a JSON number is no longer exact)` : String(v);
  if (Array.isArray(v)) return `[${v.map(shown).join(',')}]`;
  return JSON.stringify(v) ?? String(v);
}
