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

// The progress log of an active job follows the job's live event stream: each event comes as a
// line the server has rendered and escaped. After the event that settles the job the page
// reloads once to show the outcome (status, pull request, diff). A dropped connection is
// resumed by the browser from the last event it got.
const events = document.getElementById('events');
if (events && events.dataset.live === 'true') {
  const after = Number(events.dataset.after || 0);
  const source = new EventSource(`${events.dataset.eventsUrl}?after=${after}`);
  source.addEventListener('line', (message) => {
    const line = JSON.parse(message.data);
    events.insertAdjacentHTML('beforeend', line.html);
    if (line.settled) {
      source.close();
      window.location.reload();
    }
  });
  source.addEventListener('error', () => {
    // Closed for good: the job settled (204), or the session ended (a 401 or 303).
    if (source.readyState === EventSource.CLOSED) window.location.reload();
  });
}
