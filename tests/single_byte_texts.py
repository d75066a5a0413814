"""Short realistic sentences and titles in single-byte code pages of non-Latin, Central
European, Turkish, Baltic and Western European scripts, for the legacy-charset guess
(charsets.py).

Russian, Ukrainian and Bulgarian in windows-1251 and KOI8-R/KOI8-U, Greek in windows-1253
and ISO-8859-7, Thai in windows-874, Hebrew in windows-1255, Arabic in windows-1256,
Turkish in windows-1254 and ISO-8859-9, Lithuanian and Latvian in windows-1257 and
ISO-8859-13, Czech and Polish in ISO-8859-2, Central European languages in windows-1250,
Western European ones (Icelandic among them: its ð, ý and þ are Turkish ğ, ı and ş in
windows-1254) in windows-1252: titles, a sentence or two, and a longer line each. Written
for these tests; no text copied from elsewhere.
"""

RUSSIAN = (
    "Привет",
    "Здравствуйте",
    "Протокол собрания",
    "Отчёт за третий квартал",
    "Список покупок: молоко, хлеб, яйца",
    "Встреча переносится на среду, в десять часов утра.",
    "Фамилия;Имя;Телефон\nИванов;Сергей;+7 495 123-45-67\nПетрова;Анна;+7 812 765-43-21",
    "Уважаемые коллеги, напоминаем, что до конца месяца необходимо сдать годовые отчёты "
    "в бухгалтерию. Справки можно получить у секретаря на втором этаже.",
)
UKRAINIAN = (
    "Протокол засідання",
    "Доброго дня! Надсилаю звіт за минулий тиждень.",
    "Київ, вулиця Хрещатик, будинок 22",
    "Шановні батьки, батьківські збори відбудуться у четвер о шостій вечора в актовій "
    "залі школи. Просимо не запізнюватися.",
)
BULGARIAN = (
    "Счетоводен отчет",
    "Добър ден, изпращам ви документите за подпис.",
    "Срещата ще бъде в понеделник от девет часа в голямата заседателна зала на общината.",
)
GREEK = (
    "Καλημέρα",
    "Ελληνικά",
    "Πρακτικά συνεδρίασης",
    "Λίστα αγορών: γάλα, ψωμί, αυγά",
    "Η συνάντηση μεταφέρεται για την Τετάρτη στις δέκα το πρωί.",
    "Αγαπητοί συνάδελφοι, σας υπενθυμίζουμε ότι οι ετήσιες αναφορές πρέπει να υποβληθούν "
    "στο λογιστήριο μέχρι το τέλος του μήνα.",
)
THAI = (
    "สวัสดีครับ",
    "รายงานการประชุม",
    "รายการซื้อของ: นม ขนมปัง ไข่",
    "การประชุมเลื่อนไปเป็นวันพุธ เวลาสิบโมงเช้า",
    "เรียนเพื่อนร่วมงานทุกท่าน กรุณาส่งรายงานประจำปีให้ฝ่ายบัญชีภายในสิ้นเดือนนี้ "
    "หากมีข้อสงสัยสามารถสอบถามได้ที่เลขานุการชั้นสอง",
)
HEBREW = (
    "שלום",
    "פרוטוקול ישיבה",
    "רשימת קניות: חלב, לחם, ביצים",
    "הפגישה נדחתה ליום רביעי בשעה עשר בבוקר.",
    "עמיתים יקרים, נא להגיש את הדוחות השנתיים למחלקת הנהלת החשבונות עד סוף החודש. "
    "לשאלות אפשר לפנות למזכירה בקומה השנייה.",
)
ARABIC = (
    "مرحبا",
    "محضر الاجتماع",
    "قائمة المشتريات: حليب، خبز، بيض",
    "تم تأجيل الاجتماع إلى يوم الأربعاء الساعة العاشرة صباحا.",
    "الزملاء الأعزاء، نرجو تسليم التقارير السنوية إلى قسم المحاسبة قبل نهاية الشهر. "
    "للاستفسار يرجى مراجعة السكرتيرة في الطابق الثاني.",
)
TURKISH = (
    "Toplantı tutanağı",
    "Günaydın, raporu ekte gönderiyorum.",
    "Alışveriş listesi: süt, ekmek, yumurta",
    "Toplantı çarşamba sabah saat ona ertelendi.",
    "Değerli çalışma arkadaşlarım, yıllık raporların ay sonuna kadar muhasebe bölümüne "
    "teslim edilmesi gerekmektedir. Sorularınız için ikinci kattaki sekreterliğe başvurunuz.",
    "Türkçe",
    "Şirket içi duyuru",
    "İstanbul, Beşiktaş, Barbaros Bulvarı No. 12",
    "Ad;Soyad;Telefon\nAyşe;Yılmaz;+90 532 123 45 67\nMehmet;Öztürk;+90 505 765 43 21",
)
LITHUANIAN = (
    "Lietuvių kalba",
    "Posėdžio protokolas",
    "Pirkinių sąrašas: pienas, duona, kiaušiniai",
    "Laba diena, siunčiu praėjusios savaitės ataskaitą.",
    "Susitikimas perkeliamas į trečiadienį, dešimtą valandą ryto.",
    "Vardas;Pavardė;Telefonas\nJonas;Petrauskas;+370 612 34567\nRūta;Kazlauskienė;+370 698 76543",
    "Gerbiami kolegos, primename, kad metines ataskaitas buhalterijai reikia pateikti iki "
    "mėnesio pabaigos. Su klausimais galite kreiptis į sekretorę antrame aukšte.",
)
LATVIAN = (
    "Latviešu valoda",
    "Sēdes protokols",
    "Iepirkumu saraksts: piens, maize, olas",
    "Labdien, nosūtu pagājušās nedēļas atskaiti.",
    "Tikšanās ir pārcelta uz trešdienu, pulksten desmitos no rīta.",
    "Vārds;Uzvārds;Tālrunis\nJānis;Bērziņš;+371 2612 3456\nLiene;Kalniņa;+371 2987 6543",
    "Cienījamie kolēģi, atgādinām, ka gada pārskati grāmatvedībā jāiesniedz līdz mēneša "
    "beigām. Ar jautājumiem lūdzam vērsties pie sekretāres otrajā stāvā.",
)
CENTRAL = (
    "Čeština",
    "Zápis z porady",
    "Dzień dobry, przesyłam sprawozdanie za zeszły tydzień.",
    "Schůzka se přesouvá na středu v deset hodin dopoledne.",
)
CENTRAL_WINDOWS = (
    "Zápis z porady",
    "Dzień dobry, przesyłam sprawozdanie za zeszły tydzień.",
    "Az értekezletet szerdán délelőtt tíz órára halasztjuk.",
    "Stretnutie sa presúva na stredu o desiatej hodine.",
    "Sastanak je pomaknut na srijedu u deset sati ujutro.",
    "Sestanek je prestavljen na sredo ob desetih dopoldne.",
    # with cedillas: windows-1250 has no s and t with a comma below
    "Şedinţa se amână pentru miercuri la ora zece dimineaţa.",
    "Móda ve městě",  # read as windows-1252 Móda ve mìstì while Italian had ó (CLDR: auxiliary)
)
WESTERN = (
    "Compte rendu de la réunion",
    "La réunion est reportée à mercredi, dix heures du matin.",
    "Besprechungsprotokoll für Köln",
    "Die Sitzung wird auf Mittwoch verschoben. Viele Grüße, Jürgen",
    "Acta de la reunión",
    "La reunión se traslada al miércoles a las diez de la mañana.",
    "A reunião foi adiada para quarta-feira às dez horas da manhã.",
    "Verbale della riunione: la riunione è spostata a mercoledì.",
    "La reunió s'ha traslladat a dimecres a les deu del matí.",
    "Mötet flyttas till onsdag klockan tio på förmiddagen.",
    "Mødet er flyttet til onsdag klokken ti om formiddagen.",
    "Kokous siirtyy keskiviikolle kello kymmeneen aamupäivällä.",
    "Tõnu saadab möödunud nädala aruande.",
    "Fundargerð",
    "Góðan daginn, ég sendi þér skýrsluna frá síðustu viku.",
    "Fundurinn verður færður til miðvikudags klukkan tíu að morgni.",
    "Šakkiturnaus pidetään Ålandissa ensi viikolla.",  # Finnish š (CLDR), was cp1250 Ĺlandissa
)
#: (text, encoding) for every sample.
CORPUS = (
    [(t, "cp1251") for t in RUSSIAN + UKRAINIAN + BULGARIAN]
    + [(t, "koi8_r") for t in RUSSIAN]
    + [(t, "koi8_u") for t in UKRAINIAN]
    + [(t, "cp1253") for t in GREEK]
    + [(t, "iso8859_7") for t in GREEK]
    + [(t, "cp874") for t in THAI]
    + [(t, "cp1255") for t in HEBREW]
    + [(t, "cp1256") for t in ARABIC]
    + [(t, "cp1254") for t in TURKISH]
    + [(t, "iso8859_9") for t in TURKISH]
    + [(t, "cp1257") for t in LITHUANIAN + LATVIAN]
    + [(t, "iso8859_13") for t in LITHUANIAN + LATVIAN]
    + [(t, "iso8859_2") for t in CENTRAL]
    + [(t, "cp1250") for t in CENTRAL_WINDOWS]
    + [(t, "cp1252") for t in WESTERN]
)
