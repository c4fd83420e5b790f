// The header's "Defaults" button: it asks through an in-page dialog (issue 24: a native confirm() blocks
// the page, cannot be styled, and automation has to answer it out of band). A modal <dialog> keeps focus
// inside, Esc cancels, and the confirming button is not the default so Enter alone resets nothing.
import { useEffect, useRef, useState } from 'react';

export function DefaultsButton({ onReset }: { onReset: () => void }) {
  const [open, setOpen] = useState(false);
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (open && d && !d.open) d.showModal();
  }, [open]);
  const close = (reset: boolean) => {
    ref.current?.close();
    setOpen(false);
    if (reset) onReset();
  };
  return (
    <>
      <button title="restore default prompts, sampling, rewards and loss settings" onClick={() => setOpen(true)} data-testid="defaults">
        Defaults
      </button>
      {open && (
        <dialog ref={ref} className="confirm-dialog" data-testid="defaults-dialog" aria-labelledby="defaults-title" onCancel={() => setOpen(false)}>
          <p id="defaults-title">Reset prompts, sampling, rewards and loss settings to their defaults?</p>
          <div className="row">
            <button autoFocus onClick={() => close(false)} data-testid="defaults-cancel">
              Cancel
            </button>
            <button onClick={() => close(true)} data-testid="defaults-confirm">
              Reset to defaults
            </button>
          </div>
        </dialog>
      )}
    </>
  );
}
