// The grid's cell and text colours by region, in one pure module so the contrast test reads the same
// values the canvas and the saved report paint (tests/ui/ui_contrast.test.ts).

/** Cell colour by REGION value (absent, pad, prompt, special, completion, EOS, after EOS). */
export const REGION_COLORS = ['#0e1117', '#2b2f3a', '#1f4a73', '#5b3f8c', '#1f6b45', '#a07a18', '#4a2f2f'] as const;

/**
 * Text colour per region, each ≥ 4.5:1 (WCAG AA) against its cell: dark text on the bright EOS amber
 * (white on it was below 4.5:1), light grey on pad / after-EOS (the muted grey failed there too).
 */
export const REGION_TEXT = ['#e6edf3', '#c9d1d9', '#e6edf3', '#e6edf3', '#e6edf3', '#0d1117', '#d0d7de'] as const;

/** WCAG 2.x contrast ratio of two #rrggbb colours (1 … 21). */
export function contrastRatio(a: string, b: string): number {
  const lum = (hex: string) => {
    const c = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255).map((v) => (v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

/** A turn's colour by role (the grid's role band and its collapsed turn cells, src/view/turns.ts), distinct from the region colours. */
export const ROLE_COLORS = { prompt: '#58a6ff', system: '#a371f7', user: '#79c0ff', assistant: '#3fb950', tool_call: '#f0883e', tool: '#db61a2' } as const;

/** The outline of stored tokens that differ from the chat template's render (a re-tokenized tool call, a BPE seam). */
export const RETOKENIZED_COLOR = '#39c5cf';
