// Helpers shared by the bundled apps: no framework, no build step, no network.
// `keyed` re-renders a list while keeping one DOM node per item key, so an item that did not
// change keeps its node (and its ref in the agent's accessibility tree).
const ui = {
  h(tag, attrs = {}, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else if (v === true) el.setAttribute(k, '');
      else if (v !== false && v !== null && v !== undefined) el.setAttribute(k, v);
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) el.append(kid);
    return el;
  },
  keyed(container, items, key, create, update) {
    const old = new Map();
    for (const el of [...container.children]) old.set(el.dataset.key, el);
    items.forEach((item, i) => {
      const k = String(key(item));
      let el = old.get(k);
      if (el) old.delete(k); else { el = create(item); el.dataset.key = k; }
      if (update) update(el, item);
      if (container.children[i] !== el) container.insertBefore(el, container.children[i] || null);
    });
    for (const el of old.values()) el.remove();
  },
  show(el, visible) { el.hidden = !visible; },
  setError(input, errorEl, message) {
    errorEl.textContent = message || '';
    if (message) input.setAttribute('aria-invalid', 'true'); else input.removeAttribute('aria-invalid');
  },
  load(key, fallback) { try { const v = JSON.parse(localStorage.getItem(key)); return v === null ? fallback : v; } catch (e) { return fallback; } },
  save(key, value) { localStorage.setItem(key, JSON.stringify(value)); },
  copy(v) { return JSON.parse(JSON.stringify(v)); },
};
