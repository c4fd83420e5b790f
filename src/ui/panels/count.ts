// "1 rule skipped", "2 rules skipped": a count with its noun in the right number, for the panels' summaries
// (issue 24: the Doctor read "1 rules skipped"). English plural by -s unless the noun gives its own.

/** `n noun` with the noun singular for exactly 1, else `plural` (default noun + "s"). */
export function countOf(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
