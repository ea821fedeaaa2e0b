# renames.sed - words renamed on purpose since expected/ was written (issue 29
# glossary): applied to the expected text before comparing. Empty while
# the output has not changed.
