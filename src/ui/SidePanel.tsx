// The page's side columns: each collapses to a thin strip (its button stays, so the same key press brings it
// back) and resizes by a separator between it and the centre — dragged with the pointer, or focused and moved
// with the arrow keys (Shift: larger steps), as the WAI-ARIA window-splitter pattern describes. Widths live in
// the store's persisted layout slice (src/store/layout.ts), so a reload keeps them.
import type { ReactNode } from 'react';
import { useStudio } from '../store/index.ts';
import { PANEL_COLLAPSED, PANEL_MAX, PANEL_MIN, type Side } from '../store/layout.ts';

/** Pixels one arrow key press moves a separator (Shift: KEY_STEP × 4). */
const KEY_STEP = 16;

/** The grid columns of the page: left, separator, centre, separator, right. */
export function columnsTemplate(panels: ReturnType<typeof usePanels>): string {
  const w = (side: Side) => (panels[side].collapsed ? PANEL_COLLAPSED : panels[side].width);
  return `${w('left')}px 5px minmax(0, 1fr) 5px ${w('right')}px`;
}

export const usePanels = () => useStudio((s) => s.panels);

export function SidePanel({ side, title, children }: { side: Side; title: string; children: ReactNode }) {
  const { collapsed } = useStudio((s) => s.panels[side]);
  const setPanel = useStudio((s) => s.setPanel);
  // The arrow points where the panel goes: a left panel collapses leftwards.
  const arrow = (side === 'left') === collapsed ? '»' : '«';
  return (
    <aside className={`${side}${collapsed ? ' collapsed' : ''}`} aria-label={title}>
      <div className="panel-bar">
        {!collapsed && <span className="panel-title">{title}</span>}
        <button
          className="panel-toggle"
          data-testid={`collapse-${side}`}
          aria-expanded={!collapsed}
          title={collapsed ? `show the ${title.toLowerCase()} panel` : `collapse the ${title.toLowerCase()} panel`}
          onClick={() => setPanel(side, { collapsed: !collapsed })}
        >
          {arrow}
        </button>
      </div>
      <div className="panel-body" hidden={collapsed}>
        {children}
      </div>
    </aside>
  );
}

/** The separator on the centre side of a panel: drag, or focus and use ←/→ (Home / End: narrowest / widest). */
export function PanelResizer({ side }: { side: Side }) {
  const { width, collapsed } = useStudio((s) => s.panels[side]);
  const setPanel = useStudio((s) => s.setPanel);
  // Moving the separator right widens the left panel and narrows the right one.
  const sign = side === 'left' ? 1 : -1;
  const onPointerDown = (e: React.PointerEvent<HTMLDivElement>) => {
    if (collapsed) return;
    const el = e.currentTarget;
    const [x0, w0] = [e.clientX, width];
    el.setPointerCapture(e.pointerId);
    const move = (m: PointerEvent) => setPanel(side, { width: w0 + sign * (m.clientX - x0) });
    const up = () => {
      el.removeEventListener('pointermove', move);
      el.removeEventListener('pointerup', up);
    };
    el.addEventListener('pointermove', move);
    el.addEventListener('pointerup', up);
  };
  const onKeyDown = (e: React.KeyboardEvent) => {
    const step = KEY_STEP * (e.shiftKey ? 4 : 1);
    const next: Record<string, number> = { ArrowLeft: width - sign * step, ArrowRight: width + sign * step, Home: PANEL_MIN, End: PANEL_MAX };
    if (next[e.key] === undefined) return;
    e.preventDefault();
    setPanel(side, { width: next[e.key], collapsed: false });
  };
  return (
    <div
      className={`panel-resizer ${side}`}
      role="separator"
      aria-orientation="vertical"
      aria-label={`resize the ${side} panel`}
      aria-valuemin={PANEL_MIN}
      aria-valuemax={PANEL_MAX}
      aria-valuenow={width}
      tabIndex={0}
      data-testid={`resize-${side}`}
      onPointerDown={onPointerDown}
      onKeyDown={onKeyDown}
    />
  );
}
