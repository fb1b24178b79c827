"""Here-documents and the files a script writes: `read -d '' NAME <<EOF` (a document kept in a variable),
`sbatch <<EOF` and `bash <<EOF` (a document run as a script), `cat > FILE <<EOF` and `echo ... >> FILE` (a file
written, then submitted by `sbatch FILE`), and `$(cat <<EOF ...)`.
"""

from __future__ import annotations

import re

from offlint.sources.launch_words import program
from offlint.sources.shell_values import WRITTEN, _Field, _joined, _MAX_DEPTH, _P, _Var


class Documents:
    """Here-documents and written files; part of the walker."""

    def read_heredoc(self, command, redirect) -> None:
        """`read -r -d '' NAME <<'EOF' ... EOF`: NAME holds the here-document, less the whitespace around it (Megatron
        Bridge's Slurm launchers keep the script each task runs so, then `srun ... bash -c "...; ${NAME}"`; `read`
        had left NAME unknown, and the launch in it unread). Only a whole document read into one name; one whose
        delimiter is not quoted is expanded first, as this shell expands it (GCP's GPU recipes keep their worker's
        command so, `\\$RANK` left for the worker: it had stayed unknown)."""
        words = [self.raw(c) for c in command.named_children]
        if not words or words[0] != "read":
            return
        names, raw, whole, i = [], False, False, 1
        while i < len(words):
            word = words[i]
            if word in ("-d", "-rd") and i + 1 < len(words) and words[i + 1] in ("''", '""'):
                whole, raw, i = True, raw or word == "-rd", i + 2
            elif word == "-r":
                raw, i = True, i + 1
            elif word.startswith("-"):
                return  # (another option: -a, -n, -p, ... read differently)
            else:
                names.append(word)
                i += 1
        parts = self._heredoc_parts(redirect)
        if not whole or len(names) != 1 or parts is None:
            return
        body, quoted = parts
        a, b = self.ci(body.start_byte), self.ci(body.end_byte)
        text, org = self.text[a:b], list(self.org[a:b])
        if not quoted and ("$" in text or "`" in text):
            document = self._document(redirect)
            if document is None:
                return
            text, org = document.value, list(document.org)
        else:
            text, org = self._tabs_stripped(redirect, text, org)
        if not raw:  # a backslash and a newline join the lines; another backslash quotes the next character
            out, kept, k = [], [], 0
            while k < len(text):
                if text[k] == "\\" and k + 1 < len(text):
                    if text[k + 1] != "\n":
                        out.append(text[k + 1])
                        kept.append(org[k + 1])
                    k += 2
                    continue
                out.append(text[k])
                kept.append(org[k])
                k += 1
            text, org = "".join(out), kept
        first = len(text) - len(text.lstrip(" \t\n"))
        last = len(text.rstrip(" \t\n"))
        pos = self.pos(command.start_byte)
        old = self.st.env.get(names[0])
        self.st.env[names[0]] = _Var(s=text[first:last], org=tuple(org[first:last]), lines=(pos[0],), pos=pos,
                                     exported=bool(old and old.exported))

    def heredoc_script(self, statement, command, redirect) -> None:
        """`sbatch <<EOF ... EOF` (or `bash <<EOF`): the here-document is the script the job runs, read as a child
        shell with the exported environment (sbatch passes it on by default). Megatron-LM's Megatron-FSDP example
        submits `srun ... bash -c "${TRAINING_CMD}"` so; its launch had been unread. An unquoted delimiter's document
        is expanded here first, as the submitting shell does (`\\$SLURM_JOB_ID` is left for the job). A document
        `cat` writes to a file (`cat > $ROOT/job.sbatch <<- EOM`) is kept under that file's name, for the
        `sbatch $ROOT/job.sbatch` that submits it (submitted_script)."""
        words = [self.raw(c) for c in command.named_children]
        if not words or self.depth >= _MAX_DEPTH:
            return
        if words[0] == "cat" and len(words) == 1:
            target = next((c for c in statement.children if c.type == "file_redirect"), None)
            arrow = target.children[0].type if target is not None and target.children else ""
            if arrow in (">", ">>") and target.named_children:
                name = self._file_name(target.named_children[-1])
                document = self._document(redirect)
                if document is not None:
                    self.write_file(name, document.value, document.org, append=arrow == ">>")
            return
        if program(words[0]) not in ("sbatch", "bash", "sh") \
                or any(not word.startswith("-") for word in self._option_words(words[1:])):
            return  # (another command, or one given a script file: the document is its standard input)
        document = self._document(redirect)
        if document is not None:
            self.payload(document, {})

    def _option_words(self, words: list[str]) -> list[str]:
        """The words a submitting command's own words `words` (as written) give, where a word is a variable holding
        its options (`sbatch ${SBATCH_ARG} <<EOF`, SBATCH_ARG empty or " --segment=8": a MoE model zoo submits every
        benchmark so): the variable's words; an expansion whose words are not known (a variable the script does
        not set may come from its caller) stands as itself, no option."""
        out: list[str] = []
        for word in words:
            found = _PLAIN_EXPANSION.fullmatch(word)
            var = self.st.env.get(found[1] or found[2]) if found else None
            if var is None or var.unset or var.arr is not None or self.why(var.s):
                out.append(word)
            else:
                out.extend(var.s.split())
        return out

    def write_file(self, name: str, text: str, org, append: bool) -> None:
        """Note what the script writes to file `name` (WRITTEN): a here-document `cat` writes, a line `echo` appends
        (the lsaie-ss26-gipfelsturm launchers build their job so, a flag per line on the paths that want it)."""
        key = WRITTEN + name
        before = self.st.env.get(key) if append else None
        if before is not None and before.arr is None:
            text, org = before.s + text, (*before.org, *org)
        pos = org[0][:2] if org else (1, 1)
        self.st.env[key] = _Var(s=text, org=tuple(org), lines=(pos[0],), pos=pos)

    def echo_to_file(self, n, fields: list[_Field]) -> None:
        """`echo WORDS > FILE` / `>> FILE`: the line it writes (write_file); `echo -n` writes no newline, an option
        offlint does not read (-e) leaves the file unread."""
        statement = n.parent
        target = next((c for c in statement.children if c.type == "file_redirect"), None) \
            if statement is not None and statement.type == "redirected_statement" else None
        arrow = target.children[0].type if target is not None and target.children else ""
        if arrow not in (">", ">>") or not target.named_children:
            return
        words, end = fields[1:], "\n"
        if words and words[0].value == "-n":
            words, end = words[1:], ""
        name = WRITTEN + self._file_name(target.named_children[-1])
        if words and words[0].value.startswith("-"):
            self.st.env.pop(name, None)  # (what it writes is not read: the file is no longer known)
            return
        text, org = _joined(words)
        pos = (fields[0].line, fields[0].col, self.st.ctx)
        org += [org[-1] if org else pos] * len(end)
        self.write_file(name[len(WRITTEN):], text + end, org, append=arrow == ">>")

    def submitted_script(self, fields: list[_Field], vals: list[str | None]) -> None:
        """`sbatch FILE` (or bash/sh) of a file the script wrote earlier (write_file): its text is the job's script
        (haeggee/Megatron-LM's submit.sh writes `$ROOT_PATH/submission.sbatch` so). A text the paths disagree on
        (a hole) reads as the shell reads its holes."""
        if self.depth >= _MAX_DEPTH or program(vals[0]) not in ("sbatch", "bash", "sh"):
            return
        k = next((k for k in range(1, len(vals)) if not (vals[k] or "").startswith("-")), None)
        written = self.st.env.get(WRITTEN + (vals[k] if vals[k] is not None else _unquoted(fields[k].text))) \
            if k is not None else None
        if written is not None and written.arr is None and len(written.org) == len(written.s) and written.s:
            self.payload(_Field(written.s, written.org, *written.pos, written.s, written.cond), {})

    def _file_name(self, node) -> str:
        """A redirect's file as submitted_script looks it up: its value, or as written (less its quotes) where offlint
        cannot read it (`> "$SCRIPT"` and `sbatch $SCRIPT` name one file)."""
        fields = self.token(node)
        value = fields[0].word(self.st.holes).value if len(fields) == 1 else None
        return value if value is not None else _unquoted(self.raw(node))

    def _document(self, redirect) -> _Field | None:
        """A here-document's text as the command reads it: expanded by this shell unless its delimiter is quoted,
        less leading tabs with `<<-`; None where offlint cannot place every character."""
        parts = self._heredoc_parts(redirect)
        if parts is None:
            return None
        body, quoted = parts
        a, b = self.ci(body.start_byte), self.ci(body.end_byte)
        if quoted:
            text, org = self.text[a:b], list(self.org[a:b])
        else:
            parts, i = [], a
            for c in body.named_children:
                if c.type != "heredoc_content":
                    parts += self.lit(i, self.ci(c.start_byte), True) + self.exp(c, True)
                    i = self.ci(c.end_byte)
            parts += self.lit(i, b, True)
            text, org = "".join(part.text for part in parts), [o for part in parts for o in part.org]
        if len(org) != len(text):
            return None
        text, org = self._tabs_stripped(redirect, text, org)
        line, col = self.pos(body.start_byte)
        return _Field(text, tuple(org), line, col, self.raw(body), self.st.ctx)

    def cat_document(self, n, q: bool) -> list[_P] | None:
        """`$(cat <<EOM ... EOM)`: the here-document as cat prints it, less the trailing newlines the substitution
        drops (GCP's GPU recipes keep their worker's command so, then write it to the file torchrun runs); None where
        the substitution is anything else."""
        stmts = [c for c in n.named_children if c.type != "comment"]
        if len(stmts) != 1 or stmts[0].type != "redirected_statement":
            return None
        body = stmts[0].child_by_field_name("body")
        redirects = [c for c in stmts[0].children if c.type.endswith("redirect")]
        if body is None or body.type != "command" or self.raw(body) != "cat" or len(redirects) != 1 \
                or redirects[0].type != "heredoc_redirect":
            return None
        document = self._document(redirects[0])
        if document is None:
            return None
        text = document.value.rstrip("\n")
        return [_P(text, list(document.org[:len(text)]), split=not q, quoted=q)]

    def _heredoc_parts(self, redirect) -> tuple[object, bool] | None:
        """(a here-document's body node, whether its delimiter is quoted: then nothing in it is expanded); None where
        tree-sitter gave either no body or no delimiter."""
        body = next((c for c in redirect.children if c.type == "heredoc_body"), None)
        start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
        if body is None or start is None:
            return None
        return body, self.raw(start)[:1] in ("'", '"', "\\")

    def _tabs_stripped(self, redirect, text: str, org: list) -> tuple[str, list]:
        """With `<<-`, a here-document less the tabs that begin its lines (they are not part of it)."""
        if not self.raw(redirect).startswith("<<-"):
            return text, org
        kept = [k for k, ch in enumerate(text) if not (ch == "\t" and (k == 0 or text[k - 1] in "\n\t"))]
        return "".join(text[k] for k in kept), [org[k] for k in kept]


# `$X` or `${X}` unquoted: the words of X's value
_PLAIN_EXPANSION = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _unquoted(text: str) -> str:
    return text.replace('"', "").replace("'", "")
