// The dashboard's only script, served from the package (the CSP allows no inline script):
// copy buttons. Pages work without it; the text to copy stays selectable.
document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const source = document.getElementById(button.getAttribute('data-copy') || '');
  if (!source) return;
  const text = source.textContent || '';
  const done = (label) => {
    button.textContent = label;
    setTimeout(() => {
      button.textContent = 'Copy';
    }, 2000);
  };
  if (navigator.clipboard) {
    navigator.clipboard.writeText(text).then(
      () => done('Copied'),
      () => select(source, done),
    );
  } else select(source, done);
});

function select(node, done) {
  const range = document.createRange();
  range.selectNodeContents(node);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  done('Selected: press Ctrl+C');
}

// The progress log of an active job: new events are fetched every second and appended (the
// server renders and escapes each line); when the job stops being active the page reloads
// once to show its outcome (status, pull request, diff).
const events = document.getElementById('events');
if (events && events.dataset.live === 'true') {
  const url = events.dataset.eventsUrl;
  let after = Number(events.dataset.after || 0);
  const poll = () => {
    fetch(`${url}?after=${after}`, { headers: { accept: 'application/json' } })
      .then((response) => {
        if (response.status === 401) {
          window.location.assign('/');
          return undefined;
        }
        return response.ok ? response.json() : undefined;
      })
      .then((page) => {
        if (!page) return;
        for (const event of page.events) {
          events.insertAdjacentHTML('beforeend', event.html);
          after = event.seq;
        }
        if (page.status !== 'active') window.location.reload();
      })
      .catch(() => {
        // A failed poll (network, a restarting server) is tried again at the next tick.
      })
      .finally(() => setTimeout(poll, 1000));
  };
  setTimeout(poll, 1000);
}
