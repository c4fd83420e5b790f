// A folder drop zone with a "pick one" button, for the model and adapter folders: a dropped directory is
// walked into File objects with their relative paths (dropped_files.ts), a picked one comes from a hidden
// webkitdirectory input (`<testId>-button`, `<testId>-input` for the e2e tests).
import { useRef, useState } from 'react';
import { droppedFiles } from './dropped_files.ts';

export function FolderDrop({ what, busy, testId, onFolder }: { what: string; busy: boolean; testId: string; onFolder: (files: File[]) => void }) {
  const [dragging, setDragging] = useState(false);
  const inputRef = useRef<HTMLInputElement>(null);
  return (
    <div
      className={dragging ? 'dropzone over' : 'dropzone'}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        e.stopPropagation();
        setDragging(false);
        void droppedFiles(e.dataTransfer.items).then(onFolder);
      }}
    >
      drop {what} or{' '}
      <button className="link-button" disabled={busy} onClick={() => inputRef.current?.click()} data-testid={`${testId}-button`}>
        pick one
      </button>
      <input
        ref={inputRef}
        type="file"
        hidden
        data-testid={`${testId}-input`}
        {...({ webkitdirectory: '' } as object)}
        multiple
        onChange={(e) => {
          onFolder(Array.from(e.target.files ?? []));
          e.target.value = '';
        }}
      />
    </div>
  );
}
