needs "Library/words.ml";;
