// Destructive plain forms (archive a fact, …) carry data-confirm: ask before they submit.
// htmx controls use hx-confirm instead, which htmx asks itself.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  const question = (event.submitter && event.submitter.dataset.confirm) || form.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
}, true);
