// Intake: a chosen CSV file is shown in the text area, so the operator sees what will be
// checked (the file itself is uploaded too). External file: the CSP allows no inline script.
document.addEventListener("change", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || !input.dataset.fills || !input.files?.length) {
    return;
  }
  const target = document.getElementById(input.dataset.fills);
  if (!target) return;
  input.files[0].text().then((text) => { target.value = text.replace(/^\uFEFF/, ""); });
});
