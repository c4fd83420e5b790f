// A bounded preview of a text field of the batch (a completion, a prompt, a message): the page renders at
// most PREVIEW_CHARS of it and names the full length, because a 200 MB string in the DOM takes the
// renderer down. Only what is rendered is cut: the batch keeps the whole value, so rewards, steps and the
// export read every character ("nothing the user entered is lost").

export const PREVIEW_CHARS = 20_000;

export interface Preview {
  text: string;
  /** The full value's length in UTF-16 code units (String.length), as JSON and the export count it. */
  length: number;
  truncated: boolean;
}

export function preview(value: string, max = PREVIEW_CHARS): Preview {
  if (value.length <= max) return { text: value, length: value.length, truncated: false };
  // Never cut a surrogate pair in half (the preview would end in a lone surrogate).
  const code = value.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return { text: value.slice(0, end), length: value.length, truncated: true };
}

/** "shown 20,000 of 209,715,200 characters", for a truncated preview. */
export function previewNote(p: Preview): string {
  return `… shown ${p.text.length.toLocaleString('en-US')} of ${p.length.toLocaleString('en-US')} characters (the batch keeps the whole value; export writes it)`;
}
