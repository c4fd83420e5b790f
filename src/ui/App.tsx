// The studio page: header (adapter, import / export), settings on the left (model, prompts, sampling,
// rewards, loss), the stepper and the token view in the middle, Doctor and charts on the right; the mismatch
// explorer opens over the right column, leaving the grid and its inspectors in view.
// A grpo-batch/v1 JSON dropped anywhere on the page is imported.
import { useEffect, useRef, useState } from 'react';
import { studioStore, useStudio } from '../store/index.ts';
import { Charts } from './Charts.tsx';
import { exportBatch, importBatchFiles, saveReport, startStudio } from '../store/controller.ts';
import { shownHeat } from './grid/heat.ts';
import { SampleInspector, TokenInspector } from './Inspector.tsx';
import { BeforeAfterPanel } from './panels/BeforeAfterPanel.tsx';
import { DiffPanel } from './panels/DiffPanel.tsx';
import { DoctorPanel } from './panels/DoctorPanel.tsx';
import { ErrorBanner } from './panels/ErrorBanner.tsx';
import { LossPanel } from './panels/LossPanel.tsx';
import { LossTablePanel } from './panels/LossTablePanel.tsx';
import { TrainerPanel } from './panels/TrainerPanel.tsx';
import { ModelPanel } from './panels/ModelPanel.tsx';
import { PromptPanel, SamplingPanel, TaskPanel, ToolsPanel } from './panels/PromptPanel.tsx';
import { RewardsPanel } from './panels/RewardsPanel.tsx';
import { StageOutput } from './panels/StageOutput.tsx';
import { Stepper } from './panels/Stepper.tsx';
import { WhatIfPanel } from './panels/WhatIfPanel.tsx';
import { TokenGrid } from './grid/TokenGrid.tsx';
import { ImportProgress } from './panels/ImportProgress.tsx';
import { MismatchOpenButton, MismatchPanel } from './panels/MismatchPanel.tsx';
import { PanelResizer, SidePanel, columnsTemplate, usePanels } from './SidePanel.tsx';
import { DefaultsButton } from './panels/DefaultsButton.tsx';

function Header() {
  const adapter = useStudio((s) => s.adapter);
  const gpu = useStudio((s) => s.gpuStatus);
  const batch = useStudio((s) => s.batch);
  const resetSettings = useStudio((s) => s.resetSettings);
  // A real button (Tab reaches it) opening the hidden file input: a <label> wrapper is not focusable.
  const importRef = useRef<HTMLInputElement>(null);
  return (
    <header className="top">
      <h1>GRPO Studio</h1>
      <span className={`gpu-badge ${gpu}`} data-testid="gpu-badge" title={adapter ? JSON.stringify(adapter.limits, null, 1) : ''}>
        {adapter ? `WebGPU: ${[adapter.vendor, adapter.architecture, adapter.description].filter(Boolean).join(' · ') || 'adapter'}` : gpu === 'busy' ? 'WebGPU: probing…' : gpu === 'error' ? 'WebGPU: unavailable' : 'WebGPU: —'}
      </span>
      <span className="grow" />
      <button onClick={() => importRef.current?.click()} data-testid="import-button">
        Import batch…
      </button>
      <input
        ref={importRef}
        type="file"
        accept=".json,.jsonl,.safetensors,application/json"
        multiple
        hidden
        data-testid="import-input"
        onChange={(e) => {
          // Several files at once are the ranks / experiences of one step: one import, merged as the CLI merges them.
          const files = Array.from(e.target.files ?? []);
          if (files.length) void importBatchFiles(files);
          e.target.value = '';
        }}
      />
      <ImportProgress />
      <button disabled={!batch} onClick={exportBatch} data-testid="export">
        Export batch
      </button>
      <button disabled={!batch} onClick={() => void saveReport(shownHeat(studioStore().getState()))} data-testid="save-report" title="one self-contained HTML file (grid, findings, settings, losses) that opens offline: attach it to an issue">
        Save report
      </button>
      <MismatchOpenButton />
      <DefaultsButton onReset={resetSettings} />
    </header>
  );
}

export function App() {
  const [dropping, setDropping] = useState(false);
  const panels = usePanels();
  useEffect(() => {
    void startStudio();
  }, []);
  return (
    <div
      className={dropping ? 'app dropping' : 'app'}
      onDragOver={(e) => {
        if (e.dataTransfer.types.includes('Files')) {
          e.preventDefault();
          setDropping(true);
        }
      }}
      onDragLeave={(e) => {
        if (e.currentTarget === e.target) setDropping(false);
      }}
      onDrop={(e) => {
        e.preventDefault();
        setDropping(false);
        const files = Array.from(e.dataTransfer.files);
        if (files.length) void importBatchFiles(files);
      }}
    >
      <Header />
      <ErrorBanner />
      <div className="columns" style={{ gridTemplateColumns: columnsTemplate(panels) }}>
        <SidePanel side="left" title="Settings">
          <ModelPanel />
          <TaskPanel />
          <PromptPanel />
          <ToolsPanel />
          <SamplingPanel />
          <RewardsPanel />
          <LossPanel />
          <TrainerPanel />
        </SidePanel>
        <PanelResizer side="left" />
        <main className="center">
          <Stepper />
          <StageOutput />
          <TokenGrid />
          <div className="inspectors">
            <div>
              <h4>Token</h4>
              <TokenInspector />
            </div>
            <div>
              <h4>Sample</h4>
              <SampleInspector />
            </div>
          </div>
        </main>
        <PanelResizer side="right" />
        <SidePanel side="right" title="Doctor & results">
          <DoctorPanel />
          <LossTablePanel />
          <WhatIfPanel />
          <BeforeAfterPanel />
          <DiffPanel />
          <Charts />
        </SidePanel>
      </div>
      <MismatchPanel />
    </div>
  );
}
